"""`memrelay-lab model predict RESULTS`: demands calibrated on some configurations predict the
others (`analysis._predict`); JSON as the issue specifies it, or a table."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from .._values import jsonable
from ..analysis import predict_configurations, predictions_frame
from ..results import load, summarize
from ._output import CliError, output_options

__all__ = ["add_predict_parser", "parse_calibration"]


def add_predict_parser(kinds: argparse._SubParsersAction) -> None:
    predict = kinds.add_parser(
        "predict",
        parents=[output_options()],
        help="calibrate demands on some configurations of a results folder and predict the others",
        description="Service demands from measured processor time per request (utilization law) and an off-"
        "processor wait solved at the calibration configurations; a network whose thread pools share the "
        "processors predicts every other configuration. Default calibration: the lowest and the highest "
        "population of each setting of the other parameters (thread counts aside).",
    )
    predict.add_argument("results", type=Path, metavar="RESULTS", help="results folder written by `run`")
    predict.add_argument(
        "--calibrate",
        type=parse_calibration,
        metavar="SPEC",
        help="the configurations to calibrate on, e.g. 'clients=2,32' or 'clients=2,32;workers=4'",
    )
    predict.set_defaults(handler=_run_predict)


def parse_calibration(text: str) -> dict[str, list]:
    """``column=v1,v2;column=v`` as {column: [values]} (numbers where they parse)."""
    spec: dict[str, list] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        column, sep, values = part.partition("=")
        if not sep or not column.strip() or not values.strip():
            raise argparse.ArgumentTypeError(f"expected column=value,value;..., got {part!r}")
        spec[column.strip()] = [_value(v.strip()) for v in values.split(",") if v.strip()]
    if not spec:
        raise argparse.ArgumentTypeError("an empty calibration")
    return spec


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _run_predict(args: argparse.Namespace) -> int:
    if not (args.results / "manifest.json").is_file():
        raise CliError(f"{args.results}: not a results folder (no manifest.json)")
    summary = summarize(load(args.results))
    predictions = predict_configurations(summary.pooled_table(), summary.config_columns, calibrate=args.calibrate)
    if args.format == "table":
        print(_table(predictions_frame(predictions), summary.display_columns))
    else:
        document = {"configurations": [jsonable(p.to_dict()) for p in predictions]}
        print(json.dumps(document, indent=2, allow_nan=False))
    return 0


def _table(frame, columns) -> str:
    """Errors as measured (predicted / measured - 1); `in CI` marks a prediction inside the
    measured 95% interval, which the models' own error measure counts as 0."""
    lines = [f"{'configuration':<28} {'role':<11} {'X measured':>11} {'X model':>9} {'error':>13} "
             f"{'R measured':>10} {'R model':>8} {'error':>13}  bottleneck"]
    for _, row in frame.iterrows():
        label = ", ".join(f"{c}={row[c]}" for c in columns if c in row)[:28]
        lines.append(
            f"{label:<28} {'calibration' if row['calibration'] else 'predicted':<11} "
            f"{row['throughput_measured']:>11,.0f} {row['throughput_predicted']:>9,.0f} {_error(row, 'throughput'):>13} "
            f"{row['response_ms_measured']:>10.3f} {row['response_ms_predicted']:>8.3f} {_error(row, 'response_ms'):>13}  "
            f"{row['bottleneck']}"
        )
    predicted = frame[~frame["calibration"]]
    if len(predicted):
        for measure in ("throughput", "response_ms"):
            raw = (predicted[f"{measure}_predicted"] / predicted[f"{measure}_measured"] - 1).abs()
            within = int((raw <= 0.10).sum())
            inside = int(((raw > 0.10) & (predicted[f"{measure}_error"] == 0)).sum())
            lines.append(f"{measure}: mean |error| {100 * raw.mean():.1f}%, worst {100 * raw.max():.1f}% over "
                         f"{len(predicted)} predicted configurations; {within} within 10%, {inside} more inside "
                         "the measured 95% interval")
    return "\n".join(lines)


def _error(row, measure: str) -> str:
    measured = row[f"{measure}_measured"]
    raw = row[f"{measure}_predicted"] / measured - 1 if measured else math.nan
    return _pct(raw) + (" in CI" if row[f"{measure}_error"] == 0 else "")


def _pct(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{100 * value:+.1f}%"
