"""`distpart launch` across real hosts: two network namespaces with their own addresses,
hostnames and sshd (see cluster_hosts.py), from DGL's ip_config, from a hostfile, and from
the PBS batch script with a PBS-style node file. The ranks' hostnames prove where they ran."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster_hosts import cluster, leftovers

REPO = Path(__file__).resolve().parent.parent
DISTPART = str(Path(sys.executable).parent / "distpart")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with cluster(tmp_path_factory.mktemp("netns")) as c:
        yield c


def _banner_hosts(stderr: str) -> str:
    found = re.search(r"(\d+) ranks on (\d+) hosts \(([^)]*)\)", stderr)
    assert found, stderr
    return found.group(0)


def test_netns_ip_config_pipeline_on_two_hosts(hosts, example_dir, tmp_path):
    h0, h1 = hosts.hosts
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text(f"{h0.address} 30050 worker\n{h1.address} 30050 worker\n")
    out = tmp_path / "out"
    run = h0.run([DISTPART, "launch", "--ip-config", cfg, "--ranks-per-host", 2, "--interface", hosts.subnet,
                  "--", "pipeline", example_dir, out, "--num-parts", 4, "--method", "random"], env=hosts.env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verify: OK (4 partitions" in run.stdout
    assert _banner_hosts(run.stderr) == f"4 ranks on 2 hosts ({h0.name} x2, {h1.name} x2)"
    assert "--mca btl_tcp_if_include" in run.stderr and "-x PATH" in run.stderr
    again = h0.run([DISTPART, "launch", "--ip-config", cfg, "--ranks-per-host", 1, "--interface", hosts.subnet,
                    "--", "verify", example_dir, out / "assignment", out], env=hosts.env)
    assert again.returncode == 0 and "verify: OK" in again.stdout, again.stdout + again.stderr
    assert _banner_hosts(again.stderr) == f"2 ranks on 2 hosts ({h0.name} x1, {h1.name} x1)"


def test_netns_parmetis_across_hosts(hosts, example_dir, tmp_path):
    h0, h1 = hosts.hosts
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text(f"{h0.address}\n{h1.address}\n")
    run = h0.run([DISTPART, "launch", "--ip-config", cfg, "--interface", hosts.subnet,
                  "--", "pipeline", example_dir, tmp_path / "out", "--num-parts", 2], env=hosts.env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verify: OK (2 partitions" in run.stdout
    assert _banner_hosts(run.stderr).startswith("2 ranks on 2 hosts")


def test_netns_hostfile(hosts, example_dir, tmp_path):
    h0, h1 = hosts.hosts
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{h0.address} slots=1\n{h1.address} slots=3\n")
    run = h0.run([DISTPART, "launch", "--hostfile", hostfile, "--interface", hosts.subnet,
                  "--", "pipeline", example_dir, tmp_path / "out", "--num-parts", 4, "--method", "random"],
                 env=hosts.env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _banner_hosts(run.stderr) == f"4 ranks on 2 hosts ({h0.name} x1, {h1.name} x3)"


def test_netns_unreachable_host_is_named_quickly(hosts, example_dir, tmp_path):
    h0, _ = hosts.hosts
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text(f"{h0.address}\n{hosts.unused_address}\n")
    t0 = time.time()
    run = h0.run([DISTPART, "launch", "--ip-config", cfg, "--", "pipeline", example_dir, tmp_path / "out",
                  "--num-parts", 2], env=hosts.env, timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"cannot reach host {hosts.unused_address}" in run.stderr
    assert time.time() - t0 < 30
    assert not (tmp_path / "out").exists()


def test_netns_pbs_job_with_a_node_file(hosts, example_dir, tmp_path):
    h0, h1 = hosts.hosts
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(f"{h0.address}\n{h0.address}\n{h1.address}\n{h1.address}\n")  # one line per slot
    out = tmp_path / "out"
    env = dict(hosts.env, PBS_NODEFILE=str(nodefile), PBS_JOBID="4242.pbs-server", PBS_O_WORKDIR=str(tmp_path),
               DISTPART_VENV=str(Path(sys.executable).parent.parent), IN_DIR=str(example_dir), OUT_DIR=str(out),
               NUM_PARTS="4", RANKS_PER_NODE="1", INTERFACE=hosts.subnet)
    run = h0.run(["bash", REPO / "hostfiles" / "pbs.job"], env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verify: OK (4 partitions" in run.stdout
    assert _banner_hosts(run.stderr) == f"2 ranks on 2 hosts ({h0.name} x1, {h1.name} x1)"
    assert "PBS job 4242.pbs-server" in run.stderr


def test_netns_pbs_job_outside_pbs_says_so(tmp_path):
    run = subprocess.run(["bash", REPO / "hostfiles" / "pbs.job"], capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin"})
    assert run.returncode != 0 and "PBS_NODEFILE is not set" in run.stderr


def test_netns_hosts_are_removed_afterwards(tmp_path):
    with cluster(tmp_path, 2) as c:
        names = [h.netns for h in c.hosts]
        pids = [h.sshd.pid for h in c.hosts]
    assert not set(names) & set(leftovers())
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
