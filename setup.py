"""distpart: MPI-parallel partitioning of DGL chunked graphs for distributed GNN training."""
from setuptools import find_packages, setup

setup(
    name="distpart",
    version="0.1.0",
    description="MPI-parallel graph partitioning pipeline producing DGL-loadable partitions",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    packages=find_packages(include=["distpart", "distpart.*"]),
    # DGL's ParMETIS program has no .py suffix; the tools folder's scripts are in the packages.
    package_data={"distpart.dgltools": ["pm_dglpart"]},
    python_requires=">=3.9",
    install_requires=[
        "numpy>=1.22",
        "mpi4py>=4.0",
        "pyarrow>=12",
        "h5py>=3.6",
    ],
    extras_require={
        # pytest below 9.2: pytest-xdist 3.8 --dist loadgroup (scripts/test.sh) silently stops grouping
        # on 9.2 (pytest-xdist issue 1386); mpi_tests/conftest.py fails the run if it happens.
        "test": ["pytest>=7,<9.2", "pytest-xdist>=3.5", "pytest-timeout>=2.2", "psutil>=5", "pyyaml>=6", "matplotlib>=3.5",
                 "kaminpar==3.7.3", "hypothesis>=6"],
        "plot": ["matplotlib>=3.5"],
        # `--method kaminpar`; pinned, since distpart writes the ParHIP files this version reads.
        "kaminpar": ["kaminpar==3.7.3"],
        "torch": ["torch"],
        # --graphbolt writes DGL's GraphBolt graphs (torch objects). DGL 2.1.0, the newest on
        # PyPI, loads only with torch 2.0-2.2.1, which is built against numpy 1.x; torchdata
        # 0.7.1 still has the datapipes graphbolt imports; recent pyarrow needs numpy 2 (26.0
        # refuses 1.26), 17.0 does not. scripts/setup-dgl.sh builds such an environment.
        "graphbolt": ["dgl==2.1.0", "torch==2.2.1", "torchdata==0.7.1", "numpy<2", "pyarrow>=12,<18",
                      "pandas<2.3", "pyyaml", "pydantic"],
    },
    entry_points={"console_scripts": ["distpart = distpart.cli:main"]},
)
