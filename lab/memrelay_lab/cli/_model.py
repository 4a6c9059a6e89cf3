"""`memrelay-lab model`: M/M/1, M/M/m, an MVA network from a file, and `model build` (both
models from a results folder)."""

from __future__ import annotations

import argparse
import json
import textwrap
import tomllib
from pathlib import Path
from typing import Any

from .._values import configuration_label
from ..analysis import MMTables, NetworkModel, models_from_summary
from ..report import format_number
from ..results import load, summarize
from ..theory import DEFAULT_PERCENTILES, Center, asymptotic_bounds, mm1, mmm, mva
from ._predict import add_predict_parser
from ._output import CliError, emit, float_list, metrics_table, output_options

__all__ = ["add_model_parser"]


def add_model_parser(subparsers: argparse._SubParsersAction) -> None:
    model = subparsers.add_parser("model", help="queueing models: M/M/1, M/M/m, MVA network")
    kinds = model.add_subparsers(dest="model", required=True, metavar="MODEL")

    single = kinds.add_parser("mm1", help="M/M/1 queue (Jain Box 31.1)", parents=[output_options()])
    single.add_argument("--arrival-rate", type=float, required=True, metavar="L", help="lambda, jobs per second")
    single.add_argument("--service-rate", type=float, required=True, metavar="MU", help="mu, jobs per second")
    _add_percentiles_option(single)
    single.set_defaults(handler=_run_mm1)

    multi = kinds.add_parser("mmm", help="M/M/m queue (Jain Box 31.2)", parents=[output_options()])
    multi.add_argument("--arrival-rate", type=float, required=True, metavar="L", help="lambda, jobs per second")
    multi.add_argument(
        "--service-rate", type=float, required=True, metavar="MU", help="mu of ONE server, jobs per second"
    )
    multi.add_argument("--servers", type=int, required=True, metavar="M", help="number of servers m")
    _add_percentiles_option(multi)
    multi.set_defaults(handler=_run_mmm)

    network = kinds.add_parser(
        "mva", help="closed network of queues, exact MVA (Jain ch. 34, Box 36.1)", parents=[output_options()]
    )
    network.add_argument("file", type=Path, metavar="FILE", help="model file, JSON or TOML (see module docs)")
    network.set_defaults(handler=_run_mva)

    _add_model_build_parser(kinds)
    add_predict_parser(kinds)


def _add_percentiles_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--percentiles",
        type=float_list,
        default=list(DEFAULT_PERCENTILES),
        metavar="Q,Q,...",
        help="response/waiting time percentiles to report (default 50,90,95,99)",
    )


def _run_mm1(args: argparse.Namespace) -> int:
    result = mm1(args.arrival_rate, args.service_rate).to_dict(percentiles=args.percentiles)
    emit(args, result, lambda: metrics_table(result))
    return 0


def _run_mmm(args: argparse.Namespace) -> int:
    result = mmm(args.arrival_rate, args.service_rate, args.servers).to_dict(percentiles=args.percentiles)
    emit(args, result, lambda: metrics_table(result))
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

    emit(args, document, table)
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
        "The derivation is described in memrelay_lab/analysis/_network.py and _mm_tables.py.",
        parents=[output_options()],
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
    if not (args.results / "manifest.json").is_file():
        raise CliError(f"{args.results}: not a results folder (no manifest.json)")
    network, single = models_from_summary(
        summarize(load(args.results)), variant=args.variant, demands=args.demands, service_rate=args.service_rate
    )
    document = {"network": network.to_dict(), "mm": single.to_dict()}

    def table() -> str:
        return build_tables(network, single)

    emit(args, document, table)
    return 0


TABLE_WIDTH = 100
_MM_ROWS = (
    ("Response time (ms)", "response_ms"),
    ("Waiting time (ms)", "waiting_time_ms"),
    ("Jobs in the queue", "queue_length"),
    ("Jobs in the system", "jobs_in_system"),
)


def build_tables(network: NetworkModel, single: MMTables) -> str:
    """`model build --format table`: one block per configuration, lines of at most 100 characters."""
    metric_width = max(len(label) for _, label in network.METRICS)
    lines = ["MVA network of queues, per middleware: predicted against measured", ""]
    for _, row in network.comparison.iterrows():
        lines.append(_fit(f"{configuration_label(row, network.config_columns, empty='all')}: "
                          f"bottleneck {row['bottleneck']}"))
        lines.append(f"  {'metric':<{metric_width}}  {'predicted':>12}  {'measured':>12}")
        for metric, label in network.METRICS:
            predicted = format_number(row[f"{metric}_predicted"], label)
            measured = format_number(row[f"{metric}_measured"], label)
            lines.append(f"  {label:<{metric_width}}  {predicted:>12}  {measured:>12}")
        lines.append("")
    lines += ["M/M/1 and M/M/m per middleware against measured", ""]
    for _, row in single.comparison.iterrows():
        lines.append(_fit(
            f"{configuration_label(row, single.config_columns, empty='all')}: "
            f"λ = {format_number(row['arrival_rate'], 'rate')} req/s, "
            f"μ = {format_number(row['service_rate_per_worker'], 'rate')} req/s per worker, "
            f"ρ = {format_number(row['traffic_intensity'], 'ρ')}"
        ))
        lines.append(f"  {'metric':<20}  {'M/M/1':>12}  {'M/M/m':>12}  {'measured':>12}")
        for label, key in _MM_ROWS:
            cells = [format_number(row[f"{key}_{model}"], label) for model in ("mm1", "mmm", "measured")]
            lines.append(f"  {label:<20}  " + "  ".join(f"{c:>12}" for c in cells))
        lines.append("")
    lines += [_fit(f"note: {note}") for note in network.notes]
    return "\n".join(lines).rstrip("\n")


def _fit(line: str) -> str:
    """A line wrapped at `TABLE_WIDTH` (continuations indented)."""
    return textwrap.fill(line, TABLE_WIDTH, subsequent_indent="    ", break_on_hyphens=False)
