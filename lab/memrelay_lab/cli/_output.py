"""What every subcommand shares: the --format option, JSON or table output, argument types,
and the one-line message of bad input."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from ..report import format_number

__all__ = ["PROG", "CliError", "emit", "float_list", "metrics_table", "name_list", "one_line", "output_options"]

PROG = "memrelay-lab"


class CliError(Exception):
    """Bad input worth a one-line message (not a bug)."""


def output_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--format", choices=("json", "table"), default="json", help="json (default) or human-readable tables"
    )
    return options


def emit(args: argparse.Namespace, document: dict, table: Callable[[], str]) -> None:
    if args.format == "table":
        print(table())
    else:
        print(json.dumps(document, indent=2, allow_nan=False))


def metrics_table(document: dict) -> str:
    rows = []
    for key, value in document.items():
        if isinstance(value, dict):
            rows += [(f"{key}[{inner}]", inner_value) for inner, inner_value in value.items()]
        else:
            rows.append((key, value))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {format_value(value, name)}" for name, value in rows)


def format_value(value: Any, name: str = "") -> str:
    return "n/a" if value is None else format_number(value, name)


def float_list(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def name_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected column names separated by commas")
    return names


def one_line(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError):
        return f"no such file: {error.filename}"
    message = str(error) or type(error).__name__
    return " ".join(message.split())
