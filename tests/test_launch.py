"""ip_config.txt and hostfile parsing, the mpiexec command `distpart launch` builds, its host
check and exit status, and the `distpart hostfile` command. No MPI and no ssh: fake launchers
and remote shells (small scripts) stand in for them."""
import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distpart.errors import InputError
from distpart.launch import (add_launch_arguments, check_hosts, detect_flavor, hostfile_text, hydra_interface,
                             is_local, job_argv, parse_ip_addr, plan_from_args, probe_command, probe_verdict,
                             read_hostfile, read_ip_config, remote_shell)


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


def test_ip_config_ranks_per_host_counts_each_machine_once(tmp_path):
    # A machine named twice (two DGL servers on it) still gets K ranks: K is per machine.
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("10.1.0.1 30050 2 pod-0 0\n10.1.0.1 30051 2 pod-0 0\n10.1.0.2 30050 2 pod-1 0\n")
    plan, text = plan_from_args(_args(["--ip-config", str(cfg), "--ranks-per-host", "3", "--", "validate", "I"]),
                                {}, OPENMPI_VERSION, tmp_path / "h", "/py")
    assert text == "10.1.0.1 slots=3\n10.1.0.2 slots=3\n" and plan.ranks == 6
    assert plan.hosts == ("10.1.0.1", "10.1.0.2")
    plan, text = plan_from_args(_args(["--ip-config", str(cfg), "--", "validate", "I"]), {}, OPENMPI_VERSION,
                                tmp_path / "h", "/py")
    assert text == "10.1.0.1 slots=1\n10.1.0.2 slots=1\n" and plan.ranks == 2


def test_hostfile_forms_mpich_ipv6_and_bad_lines(tmp_path):
    f = tmp_path / "h"
    f.write_text("fe80::1\nfe80::1\nnode-x:3 # a comment\n")
    assert read_hostfile(f) == [("fe80::1", 2), ("node-x", 3)]
    f.write_text("node-x:0\n")
    with pytest.raises(InputError, match="line 1: bad slot count"):
        read_hostfile(f)
    with pytest.raises(InputError, match="does not exist"):
        read_hostfile(tmp_path / "missing")


def test_only_set_variables_are_forwarded(tmp_path):
    nodes = tmp_path / "nodes"
    nodes.write_text("n1 slots=2\n")
    env = {"PATH": "/v/bin:/usr/bin", "VIRTUAL_ENV": "/v", "PYTHONPATH": "", "LD_LIBRARY_PATH": "/l",
           "HOME": "/root", "MPI4PY_MPIABI": "mpich"}
    plan, _ = plan_from_args(_args(["--hostfile", str(nodes), "--", "validate", "I"]), env, OPENMPI_VERSION,
                             tmp_path / "h", "/py")
    assert plan.forwarded == ("PATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "MPI4PY_MPIABI")
    assert plan.argv()[5:13] == ["-x", "PATH", "-x", "VIRTUAL_ENV", "-x", "LD_LIBRARY_PATH", "-x", "MPI4PY_MPIABI"]
    plan, _ = plan_from_args(_args(["--hostfile", str(nodes), "--", "validate", "I"]), env, HYDRA_VERSION,
                             tmp_path / "h", "/py")
    assert plan.argv()[5:7] == ["-genvlist", "PATH,VIRTUAL_ENV,LD_LIBRARY_PATH,MPI4PY_MPIABI"]


IP_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: eth0    inet 10.213.7.1/25 scope global eth0\\       valid_lft forever preferred_lft forever
3: ib0    inet 10.1.0.5/16 brd 10.1.255.255 scope global ib0\\       valid_lft forever preferred_lft forever
3: ib0    inet6 fe80::1/64 scope link \\       valid_lft forever preferred_lft forever
"""


def test_hydra_iface_takes_a_name_so_a_subnet_becomes_the_local_interface(tmp_path):
    addrs = parse_ip_addr(IP_ADDR)
    assert addrs == {"lo": ["127.0.0.1/8"], "eth0": ["10.213.7.1/25"], "ib0": ["10.1.0.5/16", "fe80::1/64"]}
    assert hydra_interface("10.1.0.0/16", addrs) == "ib0"
    assert hydra_interface("10.213.7.0/25", addrs) == "eth0"
    assert hydra_interface("ib0", addrs) == "ib0"
    with pytest.raises(InputError, match="MPICH's mpiexec needs an interface name"):
        hydra_interface("192.168.9.0/24", addrs)
    nodes = tmp_path / "nodes"
    nodes.write_text("n1\nn2\n")
    plan, _ = plan_from_args(_args(["--hostfile", str(nodes), "--interface", "10.1.0.0/16", "--", "validate", "I"]),
                             {}, HYDRA_VERSION, tmp_path / "h", "/py", addrs)
    assert plan.argv()[5:7] == ["-iface", "ib0"]
    plan, _ = plan_from_args(_args(["--hostfile", str(nodes), "--interface", "10.1.0.0/16", "--", "validate", "I"]),
                             {}, OPENMPI_VERSION, tmp_path / "h", "/py", addrs)
    assert "10.1.0.0/16" in plan.argv()     # Open MPI takes the subnet itself


def test_bad_ranks_per_host(tmp_path):
    nodes = tmp_path / "nodes"
    nodes.write_text("n1\n")
    with pytest.raises(InputError, match="--ranks-per-host must be at least 1"):
        plan_from_args(_args(["--hostfile", str(nodes), "--ranks-per-host", "0", "--", "validate", "I"]), {},
                       OPENMPI_VERSION, tmp_path / "h", "/py")


def test_remote_shell_per_flavor_and_probe_command():
    env = {"OMPI_MCA_plm_rsh_agent": "ssh -F /c : rsh", "OMPI_MCA_plm_rsh_args": "-p 2222",
           "HYDRA_LAUNCHER_EXEC": "/opt/ssh"}
    assert remote_shell(env) == ["ssh", "-F", "/c", "-p", "2222"]
    assert remote_shell(env, "mpich") == ["/opt/ssh"]
    assert remote_shell({}, "mpich") == ["ssh"]
    cmd = probe_command(["ssh", "-F", "/c"], "n1", "/v/bin/python", 7)
    assert cmd[:7] == ["ssh", "-F", "/c", "-o", "BatchMode=yes", "-o", "ConnectTimeout=7"]
    assert cmd[7] == "n1" and "test -x /v/bin/python" in cmd[8]
    # The Kubeflow MPI Operator's agent is a script that takes no ssh options.
    assert probe_command(["/etc/mpi/kubexec.sh"], "pod-1", "/py", 7)[:2] == ["/etc/mpi/kubexec.sh", "pod-1"]


def test_probe_verdicts():
    assert probe_verdict("n1", "/py", 0, "distpart-python-ok\n", "", 20) is None
    assert "host n1 has no /py (the virtualenv must sit at the same path" in \
        probe_verdict("n1", "/py", 0, "distpart-python-missing\n", "", 20)
    assert probe_verdict("10.9.9.9", "/py", 255, "", "Warning: x\nssh: connect to host 10.9.9.9 port 22: "
                         "No route to host\n", 20) == \
        "cannot reach host 10.9.9.9: ssh: connect to host 10.9.9.9 port 22: No route to host"
    assert probe_verdict("n2", "/py", None, "", "", 20) == "cannot reach host n2: no answer within 20 s"
    assert probe_verdict("n3", "/py", 1, "", "", 20) == "cannot reach host n3: exit status 1"


def _script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


@pytest.mark.xdist_group("serial")   # it measures time: not beside the daemon tests (scripts/test.sh)
def test_check_hosts_names_every_bad_host_in_one_line_in_parallel(tmp_path):
    """A fake remote shell (the Open MPI agent variable points to it): 'bad' fails as ssh does,
    'slow' sleeps 3 s, 'novenv' lacks the interpreter; three hosts probed at once take ~3 s."""
    agent = _script(tmp_path / "fakessh", 'while [ "$1" = -o ]; do shift 2; done\nhost=$1; shift\n'
                    'case $host in\n'
                    '  bad) echo "ssh: connect to host bad port 22: Connection refused" >&2; exit 255;;\n'
                    '  slow*) sleep 3; sh -c "$*";;\n'
                    '  novenv) echo distpart-python-missing;;\n'
                    '  *) sh -c "$*";;\nesac\n')
    env = {"OMPI_MCA_plm_rsh_agent": str(agent)}
    t0 = time.time()
    check_hosts(["slow1", "slow2", "slow3", "localhost", "127.0.0.1"], env, sys.executable)
    assert time.time() - t0 < 6
    with pytest.raises(InputError) as e:
        check_hosts(["ok", "bad", "novenv", "ok"], env, sys.executable)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("cannot reach host bad: ssh: connect to host bad port 22: Connection refused; "
                          f"host novenv has no {sys.executable}")
    assert f"checked with `{agent}`" in msg
    with pytest.raises(InputError, match="cannot reach host x: remote shell '/nonexistent/ssh' not found"):
        check_hosts(["x"], {"OMPI_MCA_plm_rsh_agent": "/nonexistent/ssh"}, sys.executable)


def _own_tmpdir(tmp_path):
    """The environment with a TMPDIR of the test's own, where `distpart launch` makes its
    hostfile (tempfile.mkstemp): a check that none is left there cannot see the hostfiles of
    launches that other tests run meanwhile in /tmp (scripts/test.sh runs tests in parallel)."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    return dict(os.environ, TMPDIR=str(tmp))


def _launch(tmp_path, *argv, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "distpart", "launch", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_dry_run_prints_only_the_command_and_keeps_the_hostfile(tmp_path):
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("127.0.0.1 30050 extra column\n")
    out = _launch(tmp_path, "--ip-config", cfg, "--ranks-per-host", 2, "--dry-run", "--", "validate", "IN")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1
    argv = shlex.split(out.stdout)
    hostfile = Path(argv[argv.index("--hostfile" if "--hostfile" in argv else "-f") + 1])
    assert Path(hostfile).read_text() in ("127.0.0.1 slots=2\n", "127.0.0.1:2\n")
    assert f"hostfile {hostfile} (kept)" in out.stderr
    assert argv[-5:] == [sys.executable, "-m", "distpart", "validate", "IN"]
    hostfile.unlink()


def test_launch_runs_mpiexec_and_returns_its_status(tmp_path):
    """A fake mpiexec: Open MPI's --version, then records its argv and exits 7. The hostfile
    exists while it runs and is removed afterwards; the command goes to stderr first."""
    fake = _script(tmp_path / "mpiexec", 'if [ "$1" = --version ]; then echo "mpiexec (OpenRTE) 4.1.4"; exit 0; fi\n'
                   f'cat "$2" > {tmp_path}/seen-hostfile\necho "$@" > {tmp_path}/seen-argv\nexit 7\n')
    nodes = tmp_path / "nodes"
    nodes.write_text("localhost\nlocalhost\n")
    run = _launch(tmp_path, "--hostfile", nodes, "--mpiexec", fake, "--interface", "lo", "--", "validate", "IN")
    assert run.returncode == 7, run.stderr
    assert (tmp_path / "seen-hostfile").read_text() == "localhost slots=2\n"
    argv = (tmp_path / "seen-argv").read_text().split()
    assert not Path(argv[1]).exists()                        # temp hostfile removed afterwards
    assert argv[2:4] == ["-n", "2"] and "btl_tcp_if_include" in argv
    assert run.stderr.startswith(f"distpart launch: {fake} --hostfile ")


def test_launch_forwards_sigterm_to_mpiexec(tmp_path):
    fake = _script(tmp_path / "mpiexec", 'if [ "$1" = --version ]; then echo "HYDRA build details:"; exit 0; fi\n'
                   f'trap "echo got-term > {tmp_path}/term; exit 143" TERM\n'
                   f'touch {tmp_path}/started\nwhile :; do sleep 0.1; done\n')
    nodes = tmp_path / "nodes"
    nodes.write_text("localhost:1\n")
    proc = subprocess.Popen([sys.executable, "-m", "distpart", "launch", "--hostfile", str(nodes), "--mpiexec",
                             str(fake), "--", "validate", "IN"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while not (tmp_path / "started").exists() and time.time() < deadline:
            time.sleep(0.05)
        proc.terminate()                                      # SIGTERM to launch alone, not its group
        assert proc.wait(timeout=30) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / "term").read_text() == "got-term\n"


def test_launch_errors_exit_2_with_one_line(tmp_path):
    nodes = tmp_path / "nodes"
    nodes.write_text("n1\n")
    run = _launch(tmp_path, "--hostfile", nodes, "--mpiexec", "no-such-mpiexec", "--", "validate", "IN")
    assert run.returncode == 2 and run.stderr == ("distpart launch: error: 'no-such-mpiexec' not found: "
                                                 "install MPI or pass --mpiexec PATH\n")
    fake = _script(tmp_path / "mpiexec", 'echo "srun 22.05"\n')
    env = _own_tmpdir(tmp_path)
    run = _launch(tmp_path, "--hostfile", nodes, "--mpiexec", fake, "--", "validate", "IN", env=env)
    assert run.returncode == 2 and "cannot tell which MPI" in run.stderr
    run = _launch(tmp_path, "--hostfile", nodes, "--mpiexec", fake, "--dry-run", "--", "validate", "IN", env=env)
    assert run.returncode == 2 and run.stdout == ""
    assert not list(Path(env["TMPDIR"]).glob("distpart-hosts-*"))   # no hostfile left
    run = _launch(tmp_path, "--hostfile", nodes, "--mpiexec", fake, "--")
    assert run.returncode == 2
    agent = _script(tmp_path / "ssh", 'echo "ssh: connect to host n1 port 22: No route to host" >&2; exit 255\n')
    ompi = _script(tmp_path / "ompi", 'echo "mpiexec (OpenRTE) 4.1.4"\n')
    run = _launch(tmp_path, "--hostfile", nodes, "--mpiexec", ompi, "--", "validate", "IN",
                  env=dict(os.environ, OMPI_MCA_plm_rsh_agent=str(agent)))
    assert run.returncode == 2
    assert run.stderr.startswith("distpart launch: error: cannot reach host n1: ssh: connect to host n1 port 22: "
                                 "No route to host (checked with")
    assert len(run.stderr.splitlines()) == 1
