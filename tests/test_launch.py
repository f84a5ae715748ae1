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
