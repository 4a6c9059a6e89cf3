"""The `memrelay-lab` command line.

Subcommands (each registered by its own `_add_*_parser` function):

    memrelay-lab model mm1 --arrival-rate L --service-rate MU
    memrelay-lab model mmm --arrival-rate L --service-rate MU --servers M
    memrelay-lab model mva FILE
    memrelay-lab factorial FILE.csv --response COL --factors A,B,C [--log] [--level 0.95]
    memrelay-lab run FILE [--out DIR] [--profile quick] [--resume] [--dry-run]   (see _cli_run)
    memrelay-lab report RESULTS [--out DIR] [--level 0.95] [--tolerance 0.1] [--think-time MS]
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
import json
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ._cli_run import add_run_parser
from ._factorial import read_factorial_csv
from ._mva import Center, asymptotic_bounds, mva
from ._queueing import DEFAULT_PERCENTILES, mm1, mmm

PROG = "memrelay-lab"
EXIT_BAD_INPUT = 2


class CliError(Exception):
    """Bad input worth a one-line message (not a bug)."""


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
        print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Run memrelay experiments and analyse them.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_model_parser(subparsers)
    _add_factorial_parser(subparsers)
    add_run_parser(subparsers)  # `run`: execute an experiment design (_cli_run.py)
    _add_report_parser(subparsers)
    return parser


# ---------------------------------------------------------------- model


def _add_model_parser(subparsers: argparse._SubParsersAction) -> None:
    model = subparsers.add_parser("model", help="queueing models: M/M/1, M/M/m, MVA network")
    kinds = model.add_subparsers(dest="model", required=True, metavar="MODEL")

    single = kinds.add_parser("mm1", help="M/M/1 queue (Jain Box 31.1)", parents=[_output_options()])
    single.add_argument("--arrival-rate", type=float, required=True, metavar="L", help="lambda, jobs per second")
    single.add_argument("--service-rate", type=float, required=True, metavar="MU", help="mu, jobs per second")
    _add_percentiles_option(single)
    single.set_defaults(handler=_run_mm1)

    multi = kinds.add_parser("mmm", help="M/M/m queue (Jain Box 31.2)", parents=[_output_options()])
    multi.add_argument("--arrival-rate", type=float, required=True, metavar="L", help="lambda, jobs per second")
    multi.add_argument(
        "--service-rate", type=float, required=True, metavar="MU", help="mu of ONE server, jobs per second"
    )
    multi.add_argument("--servers", type=int, required=True, metavar="M", help="number of servers m")
    _add_percentiles_option(multi)
    multi.set_defaults(handler=_run_mmm)

    network = kinds.add_parser(
        "mva", help="closed network of queues, exact MVA (Jain ch. 34, Box 36.1)", parents=[_output_options()]
    )
    network.add_argument("file", type=Path, metavar="FILE", help="model file, JSON or TOML (see module docs)")
    network.set_defaults(handler=_run_mva)

    _add_model_build_parser(kinds)


def _add_percentiles_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--percentiles",
        type=_float_list,
        default=list(DEFAULT_PERCENTILES),
        metavar="Q,Q,...",
        help="response/waiting time percentiles to report (default 50,90,95,99)",
    )


def _run_mm1(args: argparse.Namespace) -> int:
    result = mm1(args.arrival_rate, args.service_rate).to_dict(percentiles=args.percentiles)
    _emit(args, result, lambda: _metrics_table(result))
    return 0


def _run_mmm(args: argparse.Namespace) -> int:
    result = mmm(args.arrival_rate, args.service_rate, args.servers).to_dict(percentiles=args.percentiles)
    _emit(args, result, lambda: _metrics_table(result))
    return 0


def _run_mva(args: argparse.Namespace) -> int:
    centers, population, think_time = load_network(args.file)
    result = mva(centers, population, think_time)
    bounds = asymptotic_bounds(centers, think_time, population)
    document = result.to_dict()
    document["bounds"] = bounds.to_dict()
    document["bounds"]["throughput_bound"] = bounds.throughput_bound(population)
    document["bounds"]["response_time_bound"] = bounds.response_time_bound(population)

    def table() -> str:
        frame = result.to_frame()
        at_n = frame[frame["population"] == population].drop(columns=["population", "throughput", "response_time"])
        summary = (
            f"N = {population}, Z = {think_time:g}: X = {result.throughput[-1]:.6g}, "
            f"R = {result.response_time[-1]:.6g}; bottleneck {bounds.bottleneck}, N* = {bounds.knee_population:.4g}"
        )
        return summary + "\n" + at_n.to_string(index=False)

    _emit(args, document, table)
    return 0


def load_network(path: Path) -> tuple[list[Center], int, float]:
    """Read an MVA model file (shape in the module docstring): centers, N, Z."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".toml":
        spec = tomllib.loads(text)
    else:
        spec = json.loads(text)
    if not isinstance(spec, dict):
        raise CliError(f"{path}: expected an object with population, think_time and centers")
    population = spec.get("population")
    if isinstance(population, bool) or not isinstance(population, int) or population < 1:
        raise CliError(f"{path}: 'population' must be a positive integer, got {population!r}")
    think_time = spec.get("think_time", 0.0)
    if isinstance(think_time, bool) or not isinstance(think_time, (int, float)):
        raise CliError(f"{path}: 'think_time' must be a number, got {think_time!r}")
    raw_centers = spec.get("centers")
    if not isinstance(raw_centers, list) or not raw_centers:
        raise CliError(f"{path}: 'centers' must be a non-empty list")
    centers = [_center_from_spec(path, index, raw) for index, raw in enumerate(raw_centers)]
    return centers, population, float(think_time)


def _center_from_spec(path: Path, index: int, raw: Any) -> Center:
    where = f"{path}: centers[{index}]"
    if not isinstance(raw, dict):
        raise CliError(f"{where}: expected an object")
    name = raw.get("name", f"center{index}")
    kind = raw.get("kind", "queue")
    if kind not in ("queue", "delay", "multi"):
        raise CliError(f"{where}: kind must be queue, delay or multi, got {kind!r}")
    if "demand" in raw:
        demand = raw["demand"]
    elif "service_time" in raw:
        demand = _number(where, "service_time", raw["service_time"]) * _number(where, "visits", raw.get("visits", 1))
    else:
        raise CliError(f"{where}: needs 'demand' or 'service_time'")
    demand = _number(where, "demand", demand)
    servers = raw.get("servers", 1)
    if kind == "multi" and "servers" not in raw:
        raise CliError(f"{where}: a multi center needs 'servers'")
    try:
        return Center(str(name), kind, demand, servers=servers if kind == "multi" else 1)
    except ValueError as error:
        raise CliError(f"{where}: {error}") from None


def _number(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CliError(f"{where}: '{key}' must be a number, got {value!r}")
    return float(value)


def _add_model_build_parser(kinds: argparse._SubParsersAction) -> None:
    build = kinds.add_parser(
        "build",
        help="MVA network, M/M/1 and M/M/m built from a results folder, against the measurements",
        description="Derive the service demands of the net thread, the worker pool (m = worker threads), the "
        "servers and the network from a results folder, solve the network with MVA at the measured client "
        "populations and build M/M/1 and M/M/m models; print predicted against measured (times in ms). "
        "The derivation is described in memrelay_lab/_model_builder.py.",
        parents=[_output_options()],
    )
    build.add_argument("results", type=Path, metavar="RESULTS", help="results folder written by `run`")
    build.add_argument(
        "--variant",
        choices=("nested", "seed"),
        default="nested",
        help="nested (default): the worker pool's demand includes the servers' time; seed: servers as a "
        "separate delay center after the workers (seed 000 Figure 28)",
    )
    build.add_argument(
        "--demands",
        choices=("each", "lowest"),
        default="each",
        help="each (default): every configuration's own measurements; lowest: those of the lowest client "
        "count of its group, predicting the others",
    )
    build.add_argument(
        "--service-rate",
        choices=("service-time", "peak"),
        default="service-time",
        help="M/M/1, M/M/m service rate: from the measured service time (default) or the peak throughput",
    )
    build.set_defaults(handler=_run_model_build)


def _run_model_build(args: argparse.Namespace) -> int:
    from ._model_builder import models_from_results

    if not (args.results / "manifest.json").is_file():
        raise CliError(f"{args.results}: not a results folder (no manifest.json)")
    network, single = models_from_results(
        args.results, variant=args.variant, demands=args.demands, service_rate=args.service_rate
    )
    document = {"network": network.to_dict(), "mm": single.to_dict()}

    def table() -> str:
        from ._report import _metric_table

        with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 40):
            parts = [
                "MVA network of queues, per middleware (times in ms):",
                _metric_table(network).to_string(float_format=lambda v: f"{v:.4g}"),
                "",
                "Bottleneck: "
                + "; ".join(
                    f"{', '.join(f'{c}={row[c]}' for c in network.config_columns)}: {row['bottleneck']}"
                    for _, row in network.comparison.iterrows()
                ),
                "",
                "M/M/1 and M/M/m against measured (times in ms):",
                single.comparison.to_string(index=False, float_format=lambda v: f"{v:.4g}"),
            ]
            parts += [f"note: {note}" for note in network.notes]
        return "\n".join(parts)

    _emit(args, document, table)
    return 0


# ---------------------------------------------------------------- report


def _add_report_parser(subparsers: argparse._SubParsersAction) -> None:
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
    from ._report import write_report

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


# ---------------------------------------------------------------- factorial


def _add_factorial_parser(subparsers: argparse._SubParsersAction) -> None:
    factorial = subparsers.add_parser(
        "factorial", help="2^k r factorial design from a CSV (one row per run)", parents=[_output_options()]
    )
    factorial.add_argument("file", type=Path, metavar="FILE.csv")
    factorial.add_argument("--response", required=True, metavar="COL", help="response column")
    factorial.add_argument(
        "--factors", required=True, type=_name_list, metavar="A,B,C", help="factor columns, two levels each"
    )
    factorial.add_argument("--log", action="store_true", help="multiplicative model: analyse log10(response)")
    factorial.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    factorial.set_defaults(handler=_run_factorial)


def _run_factorial(args: argparse.Namespace) -> int:
    result = read_factorial_csv(args.file, args.factors, args.response, log=args.log, level=args.level)

    def table() -> str:
        with pd.option_context("display.width", 200, "display.max_columns", 50):
            return "\n\n".join(
                frame.to_string()
                for frame in (result.sign_table_frame(), result.variation_frame(), result.effects_frame())
            )

    _emit(args, result.to_dict(), table)
    return 0


# ---------------------------------------------------------------- shared


def _output_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--format", choices=("json", "table"), default="json", help="json (default) or human-readable tables"
    )
    return options


def _emit(args: argparse.Namespace, document: dict, table: Callable[[], str]) -> None:
    if args.format == "table":
        print(table())
    else:
        print(json.dumps(document, indent=2, allow_nan=False))


def _metrics_table(document: dict) -> str:
    rows = []
    for key, value in document.items():
        if isinstance(value, dict):
            rows += [(f"{key}[{inner}]", inner_value) for inner, inner_value in value.items()]
        else:
            rows.append((key, value))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {_format_value(value)}" for name, value in rows)


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "n/a" if value is None else str(value)


def _float_list(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def _name_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected column names separated by commas")
    return names


def _one_line(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError):
        return f"no such file: {error.filename}"
    message = str(error) or type(error).__name__
    return " ".join(message.split())


if __name__ == "__main__":
    sys.exit(main())
