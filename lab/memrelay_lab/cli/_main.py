"""The `memrelay-lab` command line.

Subcommands (each in its own module, registered by its `add_*_parser`):

    memrelay-lab model mm1 --arrival-rate L --service-rate MU
    memrelay-lab model mmm --arrival-rate L --service-rate MU --servers M
    memrelay-lab model mva FILE
    memrelay-lab factorial FILE.csv --response COL --factors A,B,C [--log] [--level 0.95]
    memrelay-lab run FILE [--out DIR] [--profile quick] [--resume] [--dry-run]   (see _run)
    memrelay-lab report RESULTS [--out DIR] [--level 0.95] [--tolerance 0.1] [--think-time MS]
    memrelay-lab check RESULTS [--format json|table] [--tolerance 0.1] [--target 0.05]   (exit 1: a check failed)
    memrelay-lab testbed up --hosts N|NAMES [--rate-mbit R] [--host-rate NAME=R] ...   (see _testbed)
    memrelay-lab testbed down | status [--format json]
    memrelay-lab plan RESULTS --throughput X [--response-ms R] [--p99-ms P] [--verify]   (see _plan)
    memrelay-lab model build RESULTS [--variant nested|seed] [--demands each|lowest]
                                     [--service-rate service-time|peak]

Output is JSON on stdout (`--format table` prints tables for humans). Rates are per
second and times come out in seconds, unless the inputs use another unit consistently.
Bad input prints one line `memrelay-lab: error: ...` on stderr and exits with status 2.

The MVA model FILE is JSON (or TOML when it ends in .toml); the # notes below are
explanations, not part of the file:

    {
      "think_time": 0.0005,           # Z, seconds (default 0)
      "population": 64,               # N, number of clients
      "centers": [
        {"name": "net-thread", "kind": "queue", "demand": 0.000044},
        {"name": "workers", "kind": "multi", "demand": 0.0016, "servers": 8},
        {"name": "memcached", "kind": "delay", "demand": 0.002},
        {"name": "network", "kind": "delay", "service_time": 0.00026, "visits": 2}
      ]
    }

kind is queue (one server), delay (no queueing) or multi (m servers, "servers": m).
A center gives either "demand" (D = V * S) or "service_time" with optional "visits"
(default 1). The output holds X(n), R(n) and each center's residence time, queue length
and utilization for n = 1..N, the worker pool's P(j jobs | N), and the bottleneck with
the asymptotic bounds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._check import add_check_parser
from ._factorial import add_factorial_parser
from ._model import add_model_parser
from ._plan import add_plan_parser
from ._output import PROG, CliError, one_line
from ._report import add_report_parser
from ._run import add_run_parser
from ._testbed import add_testbed_parser

__all__ = ["build_parser", "main"]

EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # argparse already printed usage or help
        return int(exit_request.code or 0)
    try:
        return args.handler(args)
    except (CliError, ValueError, OSError) as error:
        print(f"{PROG}: error: {one_line(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Run memrelay experiments and analyse them.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_model_parser(subparsers)
    add_factorial_parser(subparsers)
    add_run_parser(subparsers)  # `run`: execute an experiment design (_run.py)
    add_report_parser(subparsers)
    add_check_parser(subparsers)
    add_testbed_parser(subparsers)  # `testbed up|down|status` (_testbed.py)
    add_plan_parser(subparsers)  # `plan RESULTS --throughput X [--verify]` (_plan.py)
    return parser
