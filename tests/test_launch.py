"""ip_config.txt -> hostfile conversion and the `distpart hostfile` command."""
import subprocess
import sys

import pytest

from distpart.errors import InputError
from distpart.launch import hostfile_text, read_ip_config


def test_ip_config_with_ports_comments_and_blank_lines(tmp_path):
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("172.31.19.1 30050\n\n# spare\n172.31.23.205\n172.31.19.1\n")
    hosts = read_ip_config(cfg)
    assert hosts == ["172.31.19.1", "172.31.23.205", "172.31.19.1"]
    assert hostfile_text(hosts, 2) == "172.31.19.1 slots=4\n172.31.23.205 slots=2\n"
    assert hostfile_text(hosts, 1, "mpich") == "172.31.19.1:2\n172.31.23.205:1\n"


@pytest.mark.parametrize("text, problem", [("", "names no machine"),
                                           ("10.0.0.1 port\n", "line 1: expected 'IP"),
                                           ("a b c\n", "line 1")])
def test_bad_ip_config(tmp_path, text, problem):
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text(text)
    with pytest.raises(InputError, match=problem) as e:
        read_ip_config(cfg)
    assert str(cfg) in str(e.value)


def test_missing_ip_config(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_ip_config(tmp_path / "nope.txt")


def test_bad_slots_and_flavor():
    with pytest.raises(InputError, match="--slots"):
        hostfile_text(["h"], 0)
    with pytest.raises(InputError, match="flavour"):
        hostfile_text(["h"], 1, "lam")


def test_cli(tmp_path):
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("10.0.0.1\n10.0.0.2\n")
    out = subprocess.run([sys.executable, "-m", "distpart.cli", "hostfile", cfg, "--slots", "8"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "10.0.0.1 slots=8\n10.0.0.2 slots=8\n"
    bad = subprocess.run([sys.executable, "-m", "distpart.cli", "hostfile", tmp_path / "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "does not exist" in bad.stderr


# ---------------------------------------------------------------- distpart launch

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

from distpart.launch import (add_launch_arguments, detect_flavor, is_local,  # noqa: E402
                             job_argv, plan_from_args, read_hostfile, remote_shell)

OPENMPI_VERSION = "mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
HYDRA_VERSION = "HYDRA build details:\n    Version:                                 4.0.2\n"


def _args(argv):
    p = argparse.ArgumentParser()
    add_launch_arguments(p)
    return p.parse_args(argv)


def test_ip_config_with_extra_columns(tmp_path):
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("10.1.0.1 30050 worker gpu0\n10.1.0.2 30050 worker\n")
    assert read_ip_config(cfg) == ["10.1.0.1", "10.1.0.2"]


def test_hostfile_dialects(tmp_path):
    f = tmp_path / "h"
    f.write_text("# comment\nnode-a slots=4 max_slots=8\nnode-b:2\nnode-c\nnode-c\nnode-a slots=1\n")
    assert read_hostfile(f) == [("node-a", 5), ("node-b", 2), ("node-c", 2)]
    f.write_text("nodeA\nnodeA\nnodeB\nnodeB\n")            # $PBS_NODEFILE: one line per slot
    assert read_hostfile(f) == [("nodeA", 2), ("nodeB", 2)]
    f.write_text("node-a slots=x\n")
    with pytest.raises(InputError, match="line 1: bad slot count"):
        read_hostfile(f)
    f.write_text("\n# nothing\n")
    with pytest.raises(InputError, match="names no machine"):
        read_hostfile(f)


def test_flavor_detection():
    assert detect_flavor(OPENMPI_VERSION) == "openmpi"
    assert detect_flavor("mpirun (Open MPI) 5.0.3") == "openmpi"
    assert detect_flavor(HYDRA_VERSION) == "mpich"
    with pytest.raises(InputError, match="cannot tell which MPI"):
        detect_flavor("srun 22.05")


def test_open_mpi_plan_from_ip_config(tmp_path):
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("10.1.0.1 30050\n10.1.0.2 30050\n")
    args = _args(["--ip-config", str(cfg), "--ranks-per-host", "2", "--interface", "10.1.0.0/24",
                  "--", "pipeline", "IN", "OUT", "--num-parts", "4"])
    env = {"PATH": "/venv/bin:/usr/bin", "VIRTUAL_ENV": "/venv"}
    plan, text = plan_from_args(args, env, OPENMPI_VERSION, tmp_path / "hosts", "/venv/bin/python")
    assert text == "10.1.0.1 slots=2\n10.1.0.2 slots=2\n"
    assert plan.argv() == ["mpiexec", "--hostfile", str(tmp_path / "hosts"), "-n", "4", "-x", "PATH",
                           "-x", "VIRTUAL_ENV", "--mca", "btl_tcp_if_include", "10.1.0.0/24",
                           "--mca", "oob_tcp_if_include", "10.1.0.0/24",
                           "/venv/bin/python", "-m", "distpart", "pipeline", "IN", "OUT", "--num-parts", "4"]


def test_hydra_plan_from_pbs_nodefile(tmp_path):
    nodes = tmp_path / "nodefile"
    nodes.write_text("n1\nn1\nn2\nn2\n")
    args = _args(["--hostfile", str(nodes), "--interface", "ib0", "--", "dispatch", "I", "A", "O"])
    plan, text = plan_from_args(args, {"PATH": "/p"}, HYDRA_VERSION, tmp_path / "h", "/py")
    assert text == "n1:2\nn2:2\n"
    assert plan.argv() == ["mpiexec", "-f", str(tmp_path / "h"), "-n", "4", "-genvlist", "PATH",
                           "-iface", "ib0", "/py", "-m", "distpart", "dispatch", "I", "A", "O"]
    args = _args(["--hostfile", str(nodes), "--ranks-per-host", "1", "--", "verify", "I", "A", "O"])
    plan, text = plan_from_args(args, {}, HYDRA_VERSION, tmp_path / "h", "/py")
    assert text == "n1:1\nn2:1\n" and plan.ranks == 2


def test_job_must_be_a_distpart_subcommand():
    assert job_argv("/py", ["--", "validate", "IN"]) == ("/py", "-m", "distpart", "validate", "IN")
    with pytest.raises(InputError, match="no job given"):
        job_argv("/py", ["--"])
    with pytest.raises(InputError, match="'launch' is not a job"):
        job_argv("/py", ["launch", "--hostfile", "h"])


def test_local_hosts_and_remote_shell():
    import socket
    assert is_local("localhost") and is_local("127.0.0.1") and is_local(socket.gethostname())
    assert not is_local("203.0.113.77")          # TEST-NET-3: never one of ours
    assert remote_shell({}) == ["ssh"]
    assert remote_shell({"OMPI_MCA_plm_rsh_agent": "ssh -F /tmp/cfg"}) == ["ssh", "-F", "/tmp/cfg"]


def test_dry_run_prints_the_command_and_keeps_the_hostfile(tmp_path):
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("127.0.0.1\n")
    out = subprocess.run([sys.executable, "-m", "distpart", "launch", "--ip-config", str(cfg),
                          "--ranks-per-host", "2", "--dry-run", "--", "validate", "IN"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    hostfile = out.stdout.splitlines()[0].split()[-1].rstrip(":")
    assert Path(hostfile).read_text() in ("127.0.0.1 slots=2\n", "127.0.0.1:2\n")
    assert out.stdout.splitlines()[-1].endswith(f"{sys.executable} -m distpart validate IN")
    Path(hostfile).unlink()
