"""`memrelay-lab check RESULTS`: the consistency and validity checks of a results folder
(`analysis._checks`), each with its value, expectation and verdict; exit status 1 when any
fails."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from .._values import jsonable
from ..analysis import checks_frame, consistency_checks, net_thread_utilization_checks
from ..results import load, summarize
from ._output import CliError, output_options

__all__ = ["add_check_parser"]

EXIT_FAILED = 1


def add_check_parser(subparsers: argparse._SubParsersAction) -> None:
    check = subparsers.add_parser(
        "check",
        parents=[output_options()],
        help="consistency and validity checks of a results folder (exit 1 if any fails)",
        description="Little's law at the clients and inside memrelay, flow balance between clients, middlewares "
        "and the servers' own counters, stationarity of the kept windows, confidence-interval widths, and the "
        "utilization the network model gives single-server centres. Each check has a value, an expectation and "
        "a verdict; the exit status is 1 when any fails.",
    )
    check.add_argument("results", type=Path, metavar="RESULTS", help="results folder written by `run`")
    check.add_argument("--tolerance", type=float, default=0.10, help="relative tolerance of the laws (default 0.10)")
    check.add_argument(
        "--target", type=float, default=0.05, help="widest acceptable CI half width over the mean (default 0.05)"
    )
    check.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    check.set_defaults(handler=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    if not (args.results / "manifest.json").is_file():
        raise CliError(f"{args.results}: not a results folder (no manifest.json)")
    results = load(args.results)
    summary = summarize(results, level=args.level)
    columns = summary.display_columns
    checks = consistency_checks(
        results, tolerance=args.tolerance, target=args.target, level=args.level, config_columns=columns
    )
    checks += net_thread_utilization_checks(summary.pooled_table(), columns)
    frame = checks_frame(checks)
    failed = int((frame["verdict"] == "FAIL").sum()) if not frame.empty else 0
    if args.format == "table":
        print(_table(frame))
        print(f"\n{len(frame)} checks: {failed} failed, {int((frame['verdict'] == 'skipped').sum())} skipped")
    else:
        document = {"checks": frame.to_dict(orient="records"), "failed": failed}
        print(json.dumps(jsonable(document), indent=2, allow_nan=False))
    return EXIT_FAILED if failed else 0


def _table(frame) -> str:
    if frame.empty:
        return "no completed runs"
    lines = []
    for name, group in frame.groupby("check", sort=False):
        lines.append(f"{name}  (expected: {group['expected'].iloc[0]})")
        for _, row in group.iterrows():
            value = "n/a" if not math.isfinite(row["value"]) else f"{row['value']:,.3f}"
            detail = f"  {row['detail']}" if row["detail"] else ""
            lines.append(f"  {row['verdict']:<7} {row['scope'][:48]:<48} {value:>10}{detail}")
    return "\n".join(lines)
