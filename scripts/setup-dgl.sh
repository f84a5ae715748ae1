#!/usr/bin/env bash
# Build, once, the separate Python environment with real DGL 2.1.0 that the real-DGL tests
# (tests/test_dgl_interop.py, mpi_tests/test_dgl_*.py, mpi_tests/test_graphbolt.py) run their
# checks under, and that runs distpart itself when it writes GraphBolt output (--graphbolt
# needs torch and DGL in the ranks' Python) or trains with DGL (docs/05-output.md, "Training with DGL").
# It also holds GraphStorm 0.5.0.post1 (mpi_tests/test_graphstorm.py and benchmarks/bench_graphstorm.py
# run its `python -m graphstorm.gpartition.dist_partition_graph` unmodified).
#
#   bash scripts/setup-dgl.sh        # prints one line: where the environment is
#   DISTPART_DGL_PYTHON=<env>/bin/python bash scripts/test.sh
#   PYTHONPATH=<clone> mpiexec -n 2 <env>/bin/python -m distpart.cli pipeline ... --graphbolt
#
# The environment lives OUTSIDE the clone, at ${DISTPART_DGL_ENV:-/var/cache/distpart/dgl-2.1.0},
# so a fresh clone (CI) on the same machine reuses it. It is a plain venv, kept apart from
# .venv: DGL 2.1.0 (the newest on PyPI) needs torch <= 2.2.1 and numpy < 2.
#
# Idempotent: a complete environment carries a stamp file, written last, naming exactly what
# was installed; with the stamp matching and `import dgl.distributed` working it is reused
# within seconds. Anything else (no stamp: a build killed half-way; another pin list; a broken
# interpreter) is deleted and rebuilt from scratch, never used. Builds are serialised with
# flock, so two runs on one machine do not build into the same folder.
#
# Why these versions: DGL 2.1.0 ships its graphbolt library for torch 2.0.0 .. 2.2.1 only
# (dgl/graphbolt/libgraphbolt_pytorch_<ver>.so), so torch 2.2.1 is the newest it loads. PyPI has
# no CPU-only torch 2.2.x for x86_64 (only CUDA 12.1 builds, which pull ~2.5 GB of NVIDIA
# libraries; they run fine without a GPU), and the one CPU wheel on this machine
# (/opt/wheels, torch 2.13.0+cpu) has no graphbolt library. torch 2.2.1 is built against
# numpy 1.x, hence numpy < 2; torchdata 0.7.1 still has the datapipes graphbolt imports.
# Every package is pinned so a rebuild gives the same environment.
set -euo pipefail

ENV_DIR="${DISTPART_DGL_ENV:-/var/cache/distpart/dgl-2.1.0}"
STAMP="$ENV_DIR/.distpart-dgl-complete"
OWNER="$ENV_DIR/.distpart-dgl-env"   # written first: only a folder with it is ever deleted

# What the environment holds, every package pinned (a rebuild gives the same environment):
#   dgl, torch, torchdata, numpy: DGL 2.1.0 and what it runs on (see above);
#   pandas, pyyaml, pydantic: imported by `import dgl.distributed` (through dgl.graphbolt) but
#     not declared by the dgl wheel; pandas < 2.3 stays on numpy 1.x;
#   the rest: their dependencies as pip resolved them (torch's CUDA 12.1 libraries, triton).
REQUIREMENTS=(
  dgl==2.1.0 torch==2.2.1 torchdata==0.7.1 numpy==1.26.4
  pandas==2.2.3 PyYAML==6.0.3 pydantic==2.14.3
  annotated-types==0.8.0 certifi==2026.10.18 charset-normalizer==3.5.2 filelock==4.2.11
  fsspec==2026.9.0 idna==3.20 Jinja2==3.1.6 MarkupSafe==3.0.4 mpmath==1.3.0 networkx==3.6.1
  psutil==7.2.2 pydantic_core==2.50.4 python-dateutil==4.0.0 pytz==2026.6 requests==2.34.2
  scipy==1.17.1 sympy==1.14.0 tqdm==4.70.1 typing-inspection==0.4.5 typing_extensions==4.16.0
  tzdata==2026.6 urllib3==2.8.0
  triton==2.2.0 nvidia-cublas-cu12==12.1.3.1 nvidia-cuda-cupti-cu12==12.1.105
  nvidia-cuda-nvrtc-cu12==12.1.105 nvidia-cuda-runtime-cu12==12.1.105
  nvidia-cudnn-cu12==8.9.2.26 nvidia-cufft-cu12==11.0.2.54 nvidia-curand-cu12==10.3.2.106
  nvidia-cusolver-cu12==11.4.5.107 nvidia-cusparse-cu12==12.1.0.106 nvidia-nccl-cu12==2.19.3
  nvidia-nvjitlink-cu12==12.9.86 nvidia-nvtx-cu12==12.1.105
)
# What distpart needs on top to run its ranks there (distpart itself comes from the clone, on
# PYTHONPATH, so every clone runs its own code). Installed with --no-deps after the above, and
# added to an existing environment without rebuilding it (packages are only added, never
# changed, so tests using the environment meanwhile are unaffected). mpi4py's wheel loads the
# system's Open MPI at run time; pyarrow 17 is the newest that runs on numpy 1.x here
# (26.0 refuses numpy 1.26); h5py 3.16 supports numpy >= 1.21.
RUN_REQUIREMENTS=(mpi4py==4.1.2 pyarrow==17.0.0 h5py==3.16.0)
RUN_STAMP="$ENV_DIR/.distpart-dgl-run-complete"

# GraphStorm, for the tests and the benchmark that run GraphStorm's partition command
# (`python -m graphstorm.gpartition.dist_partition_graph`) with distpart's tools folder.
# 0.5.0.post1 is the newest release that imports with DGL 2.1.0 (0.5.1 pulls a model that needs
# torch >= 2.3). A plain `pip install graphstorm==0.5.0.post1` would replace torchdata 0.7.1 by
# 0.9.0 (which has no datapipes, so DGL 2.1's graphbolt would stop importing) and pull ~20
# packages, so it goes in with --no-deps, with only what `import graphstorm` really imports
# (found by importing it until nothing was missing): packaging; scikit-learn and its joblib,
# threadpoolctl, narwhals, cloudpickle; transformers and the packages transformers checks at
# import (huggingface_hub, tokenizers, safetensors, regex); ogb and six. ogb's `outdated` is
# left out on purpose: without it ogb does not ask PyPI for its latest version at import.
# Added like RUN_REQUIREMENTS (only added, never rebuilt), with a stamp of its own.
GRAPHSTORM_REQUIREMENTS=(
  graphstorm==0.5.0.post1 packaging==26.4
  scikit-learn==1.9.1 joblib==1.6.0 threadpoolctl==3.8.0 narwhals==2.29.0 cloudpickle==3.1.3
  transformers==4.48.0 huggingface_hub==0.36.2 tokenizers==0.21.4 safetensors==0.8.0
  regex==2026.11.19 ogb==1.3.6 six==1.17.0
)
GRAPHSTORM_STAMP="$ENV_DIR/.distpart-dgl-graphstorm-complete"

log() { echo "setup-dgl: $*" >&2; }
die() { log "error: $*"; exit 1; }

case "$ENV_DIR" in
  /*) ;;
  *) die "DISTPART_DGL_ENV must be an absolute path, got '$ENV_DIR'" ;;
esac
ENV_DIR="${ENV_DIR%/}"

# An interpreter DGL 2.1.0 and torch 2.2.1 have wheels for (CPython 3.8 .. 3.12), with venv.
find_base_python() {
  local cand
  for cand in "${DISTPART_DGL_BASE_PYTHON:-}" python3.11 python3 python3.12 python3.10; do
    [ -n "$cand" ] || continue
    if "$cand" -c 'import sys, venv, ensurepip; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 12))' \
         >/dev/null 2>&1; then
      command -v "$cand" 2>/dev/null || echo "$cand"
      return 0
    fi
  done
  return 1
}
if ! base_python="$(find_base_python)" && command -v apt-get >/dev/null 2>&1 \
   && python3 -c 'import sys; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null; then
  # Debian/Ubuntu's python3 lacks venv until python3-venv is installed (as scripts/setup.sh does).
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  log "installing python3-venv"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  base_python="$(find_base_python)" || true
fi
[ -n "${base_python:-}" ] || die "no Python 3.8-3.12 with venv found (DGL 2.1.0 has no wheels for others); set DISTPART_DGL_BASE_PYTHON"
base_version="$("$base_python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"

# The stamp names the pins and the base interpreter: change either and the env is rebuilt.
want_stamp="$(printf '%s\n' "python $base_version" "${REQUIREMENTS[@]}")"

is_ready() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ] \
    && "$ENV_DIR/bin/python" -c 'import dgl.distributed' >/dev/null 2>&1
}

want_run_stamp="$(printf '%s\n' "${RUN_REQUIREMENTS[@]}")"
run_ready() {
  [ -f "$RUN_STAMP" ] && [ "$(cat "$RUN_STAMP")" = "$want_run_stamp" ] \
    && "$ENV_DIR/bin/python" -c 'import mpi4py, pyarrow.parquet, h5py' >/dev/null 2>&1
}
add_run_requirements() {
  "$ENV_DIR/bin/python" -m pip --no-cache-dir --disable-pip-version-check install -q --no-deps \
    "${RUN_REQUIREMENTS[@]}" || die "pip install of ${RUN_REQUIREMENTS[*]} failed (no network to PyPI?)"
  "$ENV_DIR/bin/python" -c 'import numpy, mpi4py, pyarrow.parquet, h5py, dgl.distributed' >/dev/null \
    || die "the environment cannot import distpart's dependencies next to DGL"
  printf '%s\n' "$want_run_stamp" >"$RUN_STAMP"
}

want_graphstorm_stamp="$(printf '%s\n' "${GRAPHSTORM_REQUIREMENTS[@]}")"
# What stays pinned under GraphStorm: it must not have moved DGL, torch, torchdata or numpy.
PINNED_CHECK='import importlib.metadata as m, sys
want = {"dgl": "2.1.0", "torch": "2.2.1", "torchdata": "0.7.1", "numpy": "1.26.4"}
got = {k: m.version(k) for k in want}
sys.exit(0 if got == want else "pins moved: %s" % got)'
# Cheap (no `import graphstorm`, ~5 s): the stamp and the installed version; the full start was
# checked when the stamp was written.
graphstorm_ready() {
  [ -f "$GRAPHSTORM_STAMP" ] && [ "$(cat "$GRAPHSTORM_STAMP")" = "$want_graphstorm_stamp" ] \
    && "$ENV_DIR/bin/python" -c 'import importlib.metadata as m, sys
sys.exit(m.version("graphstorm") != "0.5.0.post1")' >/dev/null 2>&1
}
add_graphstorm() {
  "$ENV_DIR/bin/python" -m pip --no-cache-dir --disable-pip-version-check install -q --no-deps \
    "${GRAPHSTORM_REQUIREMENTS[@]}" || die "pip install of ${GRAPHSTORM_REQUIREMENTS[*]} failed (no network to PyPI?)"
  "$ENV_DIR/bin/python" -c "$PINNED_CHECK" || die "installing GraphStorm changed the DGL environment's pins"
  # From / so that no graphstorm/ folder in the current directory shadows the installed one.
  (cd / && "$ENV_DIR/bin/python" -m graphstorm.gpartition.dist_partition_graph --help) >/dev/null \
    || die "GraphStorm's dist_partition_graph does not start in $ENV_DIR"
  printf '%s\n' "$want_graphstorm_stamp" >"$GRAPHSTORM_STAMP"
}

mkdir -p "$(dirname "$ENV_DIR")"
# One build at a time per environment folder; a second caller waits, then finds it ready.
exec 9>"$ENV_DIR.lock"
if ! flock -n 9; then
  log "another setup-dgl is building $ENV_DIR; waiting for it"
  flock 9
fi

if is_ready; then
  if ! run_ready; then
    log "adding distpart's run dependencies to $ENV_DIR: ${RUN_REQUIREMENTS[*]}"
    add_run_requirements
  fi
  if ! graphstorm_ready; then
    log "adding GraphStorm to $ENV_DIR (--no-deps): ${GRAPHSTORM_REQUIREMENTS[*]}"
    add_graphstorm
  fi
  echo "setup-dgl: DGL 2.1.0 environment ready (cached): $ENV_DIR/bin/python"
  exit 0
fi

if [ -e "$ENV_DIR" ]; then
  if [ -f "$OWNER" ] || [ -z "$(ls -A "$ENV_DIR")" ]; then
    log "removing incomplete or outdated environment $ENV_DIR"
    # The owner marker goes last, so a removal killed half-way is resumed by the next run.
    find "$ENV_DIR" -mindepth 1 -maxdepth 1 ! -name "$(basename "$OWNER")" -exec rm -rf {} +
    rm -rf "$ENV_DIR"
  else
    die "$ENV_DIR exists and was not made by this script; remove it or set DISTPART_DGL_ENV elsewhere"
  fi
fi

# The environment takes ~5.3 GB; fail now with a clear message rather than mid-install.
need_kb=$((6 * 1024 * 1024))
avail_kb="$(df -Pk "$(dirname "$ENV_DIR")" | awk 'NR == 2 { print $4 }')"
[ "${avail_kb:-0}" -ge "$need_kb" ] \
  || die "only $((avail_kb / 1024)) MB free under $(dirname "$ENV_DIR"); the DGL environment needs ~6 GB"

start=$SECONDS
log "building the DGL 2.1.0 environment in $ENV_DIR with $base_python ($base_version); the first build downloads ~2.7 GB"
mkdir -p "$ENV_DIR"
echo "made by distpart scripts/setup-dgl.sh; delete the whole folder to rebuild" >"$OWNER"
"$base_python" -m venv "$ENV_DIR"
# No pip cache: the environment itself is the cache, and the CUDA wheels would double the disk.
PIP=("$ENV_DIR/bin/python" -m pip --no-cache-dir --disable-pip-version-check)
"${PIP[@]}" install -q "${REQUIREMENTS[@]}" \
  || die "pip install failed (no network to PyPI?); $ENV_DIR is left incomplete and will be rebuilt"
"$ENV_DIR/bin/python" -c 'import dgl, dgl.distributed, torch; print("setup-dgl: dgl", dgl.__version__, "torch", torch.__version__)' >&2 \
  || die "the new environment cannot import dgl.distributed"
add_run_requirements
add_graphstorm
printf '%s\n' "$want_stamp" >"$STAMP"
log "built in $((SECONDS - start)) s ($(du -sh "$ENV_DIR" | cut -f1))"
echo "setup-dgl: DGL 2.1.0 environment ready: $ENV_DIR/bin/python"
