"""Static checks of the Kubernetes templates: hostfiles/mpijob.yaml, pvc.yaml and Containerfile.

Nothing is built or deployed here: the development machine has no container registry and no
cluster, so these tests only parse the files and check that they agree with each other and
with what the Kubeflow MPI Operator v2 (kubeflow.org/v2beta1, pkg/apis/kubeflow/v2beta1 and
its validation in kubeflow/mpi-operator) accepts and expects: the rank count in the launcher's
mpirun equals Worker replicas x slotsPerWorker, the image is the tag the Containerfile builds,
the data claim is the ReadWriteMany PVC shipped next to it, and the image runs the project's
own scripts/setup.sh and an sshd on port 2222 with root's keys at /root/.ssh.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Dict, List

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is not installed (pip install pyyaml)")

ROOT = Path(__file__).resolve().parents[1]
HOSTFILES = ROOT / "hostfiles"
SSH_PORT = 2222  # the MPI Operator's images and docs use sshd on 2222


@pytest.fixture(scope="module")
def job() -> dict:
    docs = [d for d in yaml.safe_load_all((HOSTFILES / "mpijob.yaml").read_text()) if d]
    assert len(docs) == 1, "mpijob.yaml should hold one object"
    return docs[0]


@pytest.fixture(scope="module")
def pvc() -> dict:
    docs = [d for d in yaml.safe_load_all((HOSTFILES / "pvc.yaml").read_text()) if d]
    assert len(docs) == 1, "pvc.yaml should hold one object"
    return docs[0]


def containerfile_instructions() -> List[tuple]:
    """(INSTRUCTION, argument text) with continuation lines joined and comments dropped."""
    out, current = [], ""
    for line in (HOSTFILES / "Containerfile").read_text().splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, rest = current.partition(" ")
        out.append((keyword.upper(), rest.strip()))
        current = ""
    assert not current, "Containerfile ends inside a continued line"
    return out


def documented_image_tag() -> str:
    """The -t TAG of the `podman build -f hostfiles/Containerfile` line in the Containerfile."""
    text = (HOSTFILES / "Containerfile").read_text()
    found = re.findall(r"podman build -f hostfiles/Containerfile -t (\S+) \.", text)
    assert found, "the Containerfile should document its build command with the image tag"
    assert len(set(found)) == 1, found
    return found[0]


def replica(job: dict, kind: str) -> dict:
    return job["spec"]["mpiReplicaSpecs"][kind]


def pod_containers(spec: dict) -> List[dict]:
    pod = spec["template"]["spec"]
    return list(pod.get("initContainers", [])) + list(pod["containers"])


def launcher_argv(job: dict) -> List[str]:
    c = replica(job, "Launcher")["template"]["spec"]["containers"][0]
    return [str(a) for a in list(c.get("command", [])) + list(c.get("args", []))]


def option(argv: List[str], *names: str) -> str:
    for i, a in enumerate(argv):
        if a in names:
            return argv[i + 1]
    raise AssertionError(f"none of {names} in {argv}")


def test_mpijob_kind_and_api_version(job):
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    assert job["kind"] == "MPIJob"
    # The operator names pods NAME-worker-I and refuses names that are not DNS-1035 labels.
    workers = replica(job, "Worker")["replicas"]
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", f"{job['metadata']['name']}-worker-{workers - 1}")


def test_mpijob_spec_fields(job):
    spec = job["spec"]
    assert isinstance(spec["slotsPerWorker"], int) and spec["slotsPerWorker"] >= 1
    assert spec["mpiImplementation"] == "OpenMPI"  # the image's MPI: Debian's Open MPI via setup.sh
    assert spec["runPolicy"]["cleanPodPolicy"] in ("None", "Running", "All")
    assert spec.get("launcherCreationPolicy", "AtStartup") in ("AtStartup", "WaitForWorkersReady")
    assert spec.get("sshAuthMountPath", "/root/.ssh") == "/root/.ssh"  # where the image's sshd looks
    assert set(spec["mpiReplicaSpecs"]) == {"Launcher", "Worker"}


def test_replica_specs(job):
    launcher, worker = replica(job, "Launcher"), replica(job, "Worker")
    assert launcher["replicas"] == 1
    assert isinstance(worker["replicas"], int) and worker["replicas"] >= 1
    for spec in (launcher, worker):
        # Only Never/OnFailure are valid, and only on the replica spec: the operator
        # overrides (and warns about) a restartPolicy in the pod template.
        assert spec.get("restartPolicy", "Never") in ("Never", "OnFailure")
        assert "restartPolicy" not in spec["template"]["spec"]
        assert spec["template"]["spec"]["containers"], "at least one container"


def test_launcher_rank_count_is_workers_times_slots(job):
    argv = launcher_argv(job)
    assert argv[0] == "mpirun", argv
    ranks = int(option(argv, "-n", "-np", "--np", "-c"))
    assert ranks == replica(job, "Worker")["replicas"] * job["spec"]["slotsPerWorker"], argv
    i = argv.index("distpart")
    assert argv[i + 1] == "pipeline", argv
    parts = int(option(argv[i:], "--num-parts"))
    assert parts % ranks == 0, "--num-parts must be a multiple of the rank count"
    # Root (no non-root securityContext, keys at /root/.ssh) needs --allow-run-as-root;
    # -x PATH gives the ranks the image's PATH with the venv.
    assert "--allow-run-as-root" in argv[:i]
    assert any(argv[k] == "-x" and argv[k + 1] == "PATH" for k in range(i - 1)), argv


def test_workers_run_sshd_on_port_2222(job):
    worker = replica(job, "Worker")["template"]["spec"]["containers"][0]
    assert "sshd -De" in " ".join(worker["command"]), worker["command"]
    for port in worker.get("ports", []):
        assert port["containerPort"] == SSH_PORT
    probe = worker.get("readinessProbe")
    if probe:
        assert probe["tcpSocket"]["port"] == SSH_PORT
    # One rank per cpu: the cpu limit is the slot count.
    assert int(worker["resources"]["limits"]["cpu"]) == job["spec"]["slotsPerWorker"]


def test_every_image_is_the_tag_the_containerfile_builds(job):
    tag = documented_image_tag()
    images = {c["image"] for kind in ("Launcher", "Worker") for c in pod_containers(replica(job, kind))}
    assert images == {tag}, images
    assert f"-t {tag} ." in (HOSTFILES / "mpijob.yaml").read_text(), "mpijob.yaml's build comment"
    version = re.search(r'version="([^"]+)"', (ROOT / "setup.py").read_text()).group(1)
    assert tag.rsplit(":", 1)[1] == version, "the image tag should be distpart's version"


def test_data_volume_is_the_shipped_rwx_claim_in_every_pod(job, pvc):
    assert pvc["apiVersion"] == "v1" and pvc["kind"] == "PersistentVolumeClaim"
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]
    assert pvc["spec"]["resources"]["requests"]["storage"]
    argv = launcher_argv(job)
    i = argv.index("pipeline")
    in_dir, out_dir = argv[i + 1], argv[i + 2]
    for kind in ("Launcher", "Worker"):
        pod = replica(job, kind)["template"]["spec"]
        claims: Dict[str, str] = {v["name"]: v["persistentVolumeClaim"]["claimName"]
                                  for v in pod.get("volumes", []) if "persistentVolumeClaim" in v}
        assert set(claims.values()) == {pvc["metadata"]["name"]}, (kind, claims)
        for c in pod_containers(replica(job, kind)):
            mounts = [m["mountPath"] for m in c.get("volumeMounts", []) if m["name"] in claims]
            assert mounts, f"{kind} container {c['name']} does not mount the data claim"
            if kind == "Worker":  # the ranks run here: they read IN and write OUT
                assert all(any(p.startswith(m.rstrip("/") + "/") for m in mounts) for p in (in_dir, out_dir))


def test_containerfile_runs_setup_and_configures_sshd():
    instructions = containerfile_instructions()
    keywords = {k for k, _ in instructions}
    assert keywords <= {"FROM", "WORKDIR", "COPY", "RUN", "ENV", "EXPOSE", "CMD", "ARG", "LABEL", "USER"}, keywords
    assert instructions[0][0] == "FROM" and re.search(r"\bdebian:bookworm\b", instructions[0][1])
    for kind, arg in instructions:
        if kind == "COPY":  # every source is in the build context (the repository root)
            for src in shlex.split(arg)[:-1]:
                assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
    copied = " ".join(a for k, a in instructions if k == "COPY")
    assert "setup.py" in copied and "distpart/" in copied and "scripts/" in copied
    runs = [a for k, a in instructions if k == "RUN"]
    assert any(re.search(r"\bscripts/setup\.sh\b", r) for r in runs), "must run the project's setup.sh"
    assert any("openssh-server" in r for r in runs)
    sshd = next(r for r in runs if "sshd_config.d" in r)
    assert f"'Port {SSH_PORT}'" in sshd and "PermitRootLogin" in sshd and "/root/.ssh/" in sshd
    assert "/run/sshd" in sshd
    client = next(r for r in runs if "ssh_config.d" in r)
    assert f"Port {SSH_PORT}" in client and "StrictHostKeyChecking no" in client
    env = " ".join(a for k, a in instructions if k == "ENV")
    assert "PATH=/opt/distpart/.venv/bin:" in env
    assert "OMPI_ALLOW_RUN_AS_ROOT=1" in env and "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in env
    cmd = [a for k, a in instructions if k == "CMD"]
    assert cmd and "sshd -De" in cmd[-1]
    assert any(k == "EXPOSE" and a == str(SSH_PORT) for k, a in instructions)
