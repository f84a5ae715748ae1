"""Starting a distpart job across machines: DGL's ip_config.txt or a hostfile -> mpiexec.

By job: `hosts` reads the host lists, every line checked (DGL's `ip_config.txt`; Open MPI
`host slots=N`, MPICH/Hydra `host:N` and one-host-per-line hostfiles), and refuses two
names of one machine (issue 28); `plan` builds the mpiexec command for the site's MPI (pure
functions, unit-tested without MPI or ssh); `probe` checks that every remote host answers
and has this virtualenv's interpreter; `command` is the `distpart launch` and `distpart
hostfile` subcommands, which run them. This file only exports.
"""
from .command import add_hostfile_arguments, add_launch_arguments, hostfile_main, launch_main
from .hosts import (FLAVORS, Resolver, distinct_hosts, format_hostfile, host_problem, host_slots, hostfile_lines,
                    hostfile_text, ip_config_lines, merged_slots, own_address, read_hostfile, read_ip_config,
                    refuse_one_machine_twice, resolve_machines)
from .plan import FORWARDED_ENV, LaunchPlan, detect_flavor, hydra_interface, job_argv, parse_ip_addr, plan_from_args
from .probe import (MAX_PROBES, PROBE_SLACK_S, SSH_TIMEOUT_S, check_hosts, is_local, probe_command, probe_verdict,
                    remote_shell)

__all__ = [
    "add_hostfile_arguments", "add_launch_arguments", "hostfile_main", "launch_main",
    "FLAVORS", "Resolver", "distinct_hosts", "format_hostfile", "host_problem", "host_slots", "hostfile_lines",
    "hostfile_text", "ip_config_lines", "merged_slots", "own_address", "read_hostfile", "read_ip_config",
    "refuse_one_machine_twice", "resolve_machines",
    "FORWARDED_ENV", "LaunchPlan", "detect_flavor", "hydra_interface", "job_argv", "parse_ip_addr", "plan_from_args",
    "MAX_PROBES", "PROBE_SLACK_S", "SSH_TIMEOUT_S", "check_hosts", "is_local", "probe_command", "probe_verdict",
    "remote_shell",
]
