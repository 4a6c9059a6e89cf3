"""`memrelay-lab report`: report.html, report.md, figures and tables of a results folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..report import write_report
from ._output import PROG, CliError

__all__ = ["add_report_parser"]


def add_report_parser(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser(
        "report",
        help="tables, plots, report.html and report.md of a results folder",
        description="Analyse a results folder: confidence intervals, time breakdown, percentiles from merged "
        "histograms, the interactive law, 2^k r tables, queueing models; write report.html (self-contained), "
        "report.md, figures/*.png and tables/*.csv.",
    )
    report.add_argument("results", type=Path, metavar="RESULTS", help="results folder written by `run`")
    report.add_argument("--out", type=Path, metavar="DIR", help="where to write (default RESULTS/report)")
    report.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    report.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="interactive law: flag a configuration whose prediction is off by more than this (default 0.10)",
    )
    report.add_argument(
        "--think-time",
        type=float,
        metavar="MS",
        help="interactive law: use this think time Z (ms) with the clients' response time, instead of "
        "client minus middleware response time",
    )
    report.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    if not (args.results / "manifest.json").is_file():
        raise CliError(f"{args.results}: not a results folder (no manifest.json)")
    report = write_report(
        args.results, args.out, level=args.level, tolerance=args.tolerance, think_time_ms=args.think_time
    )
    print(f"{PROG}: report in {report.html} and {report.markdown}")
    print(f"{PROG}: {len(report.figures)} figures, {len(report.tables)} tables (CSV in {report.out_dir / 'tables'}), "
          f"{report.elapsed_s:.1f} s")
    for note in report.notes:
        print(f"{PROG}: note: {note}")
    return 0
