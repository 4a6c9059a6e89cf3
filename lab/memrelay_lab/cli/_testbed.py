"""`memrelay-lab testbed up|down|status`: the network-namespace testbed (`memrelay_lab.testbed`).

    memrelay-lab testbed up --hosts 3 [--rate-mbit 100] [--host-rate h3=20] [--delay-ms D]
                            [--cpu-shares S] [--cpus C]
    memrelay-lab testbed up --hosts client1,mw1,server1 ...
    memrelay-lab testbed down
    memrelay-lab testbed status [--format json]     (exit 1: leftovers or a broken host)

``--prefix`` (``MEMRELAY_LAB_TESTBED_PREFIX``, default ``mrlab-``) and ``--subnet``
(``MEMRELAY_LAB_TESTBED_SUBNET``, default 10.231.7.0/24) keep two testbeds apart; the state
file goes to ``$MEMRELAY_LAB_TESTBED_DIR`` (default /run/memrelay-lab/testbed).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..testbed import HostPlan, Names, TestbedError, down, status, testbed_dir, up
from ._output import PROG, CliError

__all__ = ["add_testbed_parser"]


def add_testbed_parser(subparsers: argparse._SubParsersAction) -> None:
    testbed = subparsers.add_parser(
        "testbed", help="a testbed of network namespaces with sshd on this machine (needs root)",
        description="Hosts as Linux network namespaces on a bridge, each with a real OpenSSH server, a shaped "
        "link (tc tbf) and a cpu cgroup; experiment files use them with hosts = \"testbed\". Needs root.")
    commands = testbed.add_subparsers(dest="testbed_command", required=True, metavar="up|down|status")
    start = commands.add_parser("up", help="create the hosts (removing any leftover first) and write the state file")
    start.add_argument("--hosts", required=True, metavar="N|NAMES",
                       help="a number of hosts (named h1, h2, ...) or comma-separated names")
    start.add_argument("--rate-mbit", type=float, metavar="R", help="every host's link, Mbit/s each way (tc tbf)")
    start.add_argument("--host-rate", action="append", default=[], metavar="NAME=R",
                       help="one host's link rate in Mbit/s (repeatable; overrides --rate-mbit)")
    start.add_argument("--delay-ms", type=float, metavar="D",
                       help="added round-trip delay through each host's link (tc netem; refused where the kernel "
                            "has no netem)")
    start.add_argument("--cpu-shares", type=int, metavar="S", help="each host's cgroup cpu shares (v1 weight)")
    start.add_argument("--cpus", type=float, metavar="C", help="cap each host at C cores' time (cfs quota)")
    for command in (start, commands.add_parser("down", help="remove every namespace, veth, bridge, cgroup and "
                                               "process of the testbed (with or without its state file)"),
                    commands.add_parser("status", help="what exists, and whether it matches the state file")):
        command.add_argument("--prefix", help="names' prefix (default $MEMRELAY_LAB_TESTBED_PREFIX or mrlab-)")
        command.add_argument("--subnet", help="the bridge's network (default 10.231.7.0/24)")
        if command.prog.endswith("status"):
            command.add_argument("--format", choices=("table", "json"), default="table")
    testbed.set_defaults(handler=_run_testbed)


def _say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def _run_testbed(args: argparse.Namespace) -> int:
    try:
        names = Names.from_environment(args.prefix, args.subnet)
        folder = testbed_dir()
        if args.testbed_command == "up":
            state = up(_plans(args), names, folder, say=_say)
            print(f"{PROG}: testbed up: {len(state['hosts'])} hosts on {names.bridge} ({names.subnet}); "
                  f"state in {names.folder(folder) / 'state.json'}")
            return 0
        if args.testbed_command == "down":
            removed = down(names, folder, say=_say)
            print(f"{PROG}: testbed down: " + ("nothing was there" if not removed else f"{len(removed)} things removed"))
            return 0
        report = status(names, folder)
        print(json.dumps(report, indent=1) if args.format == "json" else _status_table(report))
        return 0 if report["up"] or report["clean"] else 1
    except TestbedError as error:
        raise CliError(str(error)) from None


def _plans(args: argparse.Namespace) -> list[HostPlan]:
    text = args.hosts.strip()
    if text.isdigit():
        if not 1 <= int(text) <= 50:
            raise CliError(f"--hosts {text}: expected 1..50 hosts")
        hosts = [f"h{i}" for i in range(1, int(text) + 1)]
    else:
        hosts = [name.strip() for name in text.split(",") if name.strip()]
    rates = {}
    for item in args.host_rate:
        name, _, value = item.partition("=")
        if name not in hosts:
            raise CliError(f"--host-rate {item}: no host {name!r} (hosts: {', '.join(hosts)})")
        try:
            rates[name] = float(value)
        except ValueError:
            raise CliError(f"--host-rate {item}: expected NAME=MBIT, e.g. h3=20") from None
    return [HostPlan(name=name, rate_mbit=rates.get(name, args.rate_mbit), delay_ms=args.delay_ms,
                     cpu_shares=args.cpu_shares, cpus=args.cpus) for name in hosts]


def _status_table(report: dict) -> str:
    lines = [f"testbed {report['prefix']}: " + ("up" if report["up"] else "clean (nothing exists)" if report["clean"]
                                               else "NOT consistent")]
    if report["state_file"]:
        lines.append(f"state file: {report['state_file']}")
    for host in report["hosts"]:
        rate = "not shaped" if host["rate_mbit"] is None else f"{host['rate_mbit']:g} Mbit/s"
        missing = f"; MISSING {', '.join(host['missing'])}" if host["missing"] else ""
        lines.append(f"  {host['name']:<10} {host['address']:<15} link {rate}, sshd pid {host['sshd_pid']}, "
                     f"{host['processes']} processes{missing}")
    for line in report["broken"]:
        lines.append(f"broken: {line}")
    for line in report["leftovers"]:
        lines.append(f"leftover: {line} (`memrelay-lab testbed down` removes it)")
    return "\n".join(lines)
