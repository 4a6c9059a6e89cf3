"""`memrelay-lab factorial`: a 2^k r design from a CSV file."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ..report import format_number
from ..theory import read_factorial_csv
from ._output import emit, name_list, output_options

__all__ = ["add_factorial_parser"]


def add_factorial_parser(subparsers: argparse._SubParsersAction) -> None:
    factorial = subparsers.add_parser(
        "factorial", help="2^k r factorial design from a CSV (one row per run)", parents=[output_options()]
    )
    factorial.add_argument("file", type=Path, metavar="FILE.csv")
    factorial.add_argument("--response", required=True, metavar="COL", help="response column")
    factorial.add_argument(
        "--factors", required=True, type=name_list, metavar="A,B,C", help="factor columns, two levels each"
    )
    factorial.add_argument("--log", action="store_true", help="multiplicative model: analyse log10(response)")
    factorial.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    factorial.set_defaults(handler=_run_factorial)


def _run_factorial(args: argparse.Namespace) -> int:
    result = read_factorial_csv(args.file, args.factors, args.response, log=args.log, level=args.level)

    def table() -> str:
        with pd.option_context("display.width", 200, "display.max_columns", 50):
            return "\n\n".join(
                frame.to_string(float_format=format_number)
                for frame in (result.sign_table_frame(), result.variation_frame(), result.effects_frame())
            )

    emit(args, result.to_dict(), table)
    return 0
