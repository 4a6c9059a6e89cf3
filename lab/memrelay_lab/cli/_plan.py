"""`memrelay-lab plan RESULTS --throughput X [--response-ms R] [--p99-ms P] [--verify]`: the
smallest configuration the model calibrated on RESULTS predicts to carry X (`analysis._plan`),
and with --verify the plan's own check: the planned configuration run through the normal
runner, predicted against measured."""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from pathlib import Path

from .._values import jsonable
from ..analysis import Plan, RoleHostCounts, plan_capacity
from ..experiment import PARAMETERS, find_binaries, parse_experiment, run_experiment
from ..results import load, summarize
from ._output import CliError, output_options
from ._predict import parse_calibration

__all__ = ["add_plan_parser"]

# The plan's check: measured throughput at least this share of the target, and the prediction
# within this relative error of the measurement.
VERIFY_THROUGHPUT_SHARE = 0.9
VERIFY_PREDICTION_ERROR = 0.10


def add_plan_parser(subparsers: argparse._SubParsersAction) -> None:
    plan = subparsers.add_parser(
        "plan",
        parents=[output_options()],
        help="the smallest configuration predicted to carry a throughput within a response-time bound",
        description="Calibrate the shared-processor model on RESULTS and search configurations (servers, "
        "middlewares, workers, client machines, link rate where links are modelled; the clients per thread "
        "that carry the target) smallest first; print the plan with its interval and why the next smaller "
        "candidate fails. Rules: lab/memrelay_lab/analysis/_plan.py.",
    )
    plan.add_argument("results", type=Path, metavar="RESULTS", help="results folder written by `run`")
    plan.add_argument("--throughput", type=float, required=True, metavar="X", help="requests per second to carry")
    plan.add_argument("--response-ms", type=float, metavar="R", help="bound on the mean response time (ms)")
    plan.add_argument("--p99-ms", type=float, metavar="P", help="bound on the 99th percentile (ms)")
    plan.add_argument("--where", type=parse_calibration, metavar="SPEC",
                      help="the configurations to calibrate on when RESULTS holds several groups, e.g. "
                      "'middleware=twemproxy' (default: the group of the highest throughput)")
    plan.add_argument("--plot", type=Path, metavar="FILE",
                      help="where the candidates' plot goes (default RESULTS/plan/plan-X.png)")
    plan.add_argument("--verify", action="store_true",
                      help="run the planned configuration (the experiment's repetitions, hosts and roles) and "
                      "compare; exit 1 when the check fails")
    plan.add_argument("--verify-out", type=Path, metavar="DIR",
                      help="results folder of the verification run (default RESULTS/plan/verify-X)")
    plan.set_defaults(handler=_run_plan)


def _run_plan(args: argparse.Namespace) -> int:
    if not (args.results / "manifest.json").is_file():
        raise CliError(f"{args.results}: not a results folder (no manifest.json)")
    results = load(args.results)
    summary = summarize(results)
    experiment_file = args.results / results.manifest["experiment"].get("file", "experiment.toml")
    document, profile = _experiment_document(experiment_file, results.manifest["experiment"].get("profile"))
    where = {k: v[0] for k, v in (args.where or {}).items()}
    print(f"plan: calibrating on {args.results} and searching (target {args.throughput:,.0f} requests/s)",
          file=sys.stderr, flush=True)
    plan = plan_capacity(summary.pooled_table(), summary.config_columns, args.throughput,
                         response_bound_ms=args.response_ms, p99_bound_ms=args.p99_ms,
                         hosts=_host_counts(document, profile), where=where)
    plot = args.plot or args.results / "plan" / f"plan-{args.throughput:.0f}.png"
    _plot(plan, plot)
    output = {"plan": jsonable(plan.to_dict()), "plot": str(plot)}
    status = 0
    if plan.chosen is None:
        status = 1
    elif args.verify:
        out = args.verify_out or args.results / "plan" / f"verify-{args.throughput:.0f}"
        output["verify"] = _verify(plan, experiment_file, profile, out)
        status = 0 if output["verify"]["passed"] else 1
    if args.format == "table":
        print(_table(plan, plot, output.get("verify")))
    else:
        print(json.dumps(jsonable(output), indent=2, allow_nan=False))
    return status


def _experiment_document(path: Path, profile: str | None) -> tuple[dict, str | None]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")), profile
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CliError(f"{path}: cannot read the experiment of the results: {error}") from None


def _host_counts(document: dict, profile: str | None) -> RoleHostCounts:
    """How many hosts each role may use, from the experiment's [hosts] and [roles] (with its profile)."""
    merged = {**document, **(document.get("profile", {}).get(profile, {}) if profile else {})}
    hosts, roles = merged.get("hosts"), merged.get("roles") or {}
    if hosts is None:
        return RoleHostCounts()
    count = lambda role: len(roles.get(role, [])) or None  # noqa: E731
    return RoleHostCounts(servers=count("servers"), middlewares=count("middlewares"), clients=count("clients"),
                          links_fixed=hosts == "testbed")


# ---------------------------------------------------------------- verify


def derived_experiment(plan: Plan, experiment_text: str, profile: str | None) -> str:
    """The experiment file of the planned configuration: the original file with its profile's
    settings, every swept key fixed at the plan's value (TOML)."""
    document = tomllib.loads(experiment_text)
    profiles = document.pop("profile", {})
    if profile:
        document.update(profiles.get(profile, {}))
    document.pop("combinations", None)
    chosen = {**plan.base, **plan.chosen.parameters}
    for key in PARAMETERS:
        value = chosen.get(key)
        usable = value is not None and value not in ("n/a", "none") and not (isinstance(value, float) and
                                                                          math.isnan(value))
        if usable and (key in plan.chosen.parameters or isinstance(document.get(key), list)):
            document[key] = _toml_value(key, value)
        elif isinstance(document.get(key), list):
            document[key] = document[key][0]
    original = document.get("name", "experiment")
    document["name"] = f"{original}-plan-{int(plan.target)}"
    document["description"] = f"memrelay-lab plan --verify: {plan.target:,.0f} requests/s, derived from {original}"
    return _dump_toml(document)


def _toml_value(key: str, value):
    if key in ("servers", "middlewares", "workers", "client_machines", "clients_per_thread",
               "instances_per_machine", "threads_per_instance", "multiget", "value_size", "keys", "pipeline"):
        return int(value)
    if hasattr(value, "item"):
        return value.item()
    return value


def _dump_toml(document: dict) -> str:
    """Just enough TOML for an experiment file: scalars, lists of scalars, tables of those."""
    lines, tables = [], []
    for key, value in document.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_toml_scalar(value)}")
    for key, table in tables:
        nested = [(k, v) for k, v in table.items() if isinstance(v, dict)]
        flat = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
        if flat:
            lines += ["", f"[{key}]"] + [f"{k} = {_toml_scalar(v)}" for k, v in flat]
        for name, inner in nested:
            lines += ["", f"[{key}.{name}]"] + [f"{k} = {_toml_scalar(v)}" for k, v in inner.items()]
    return "\n".join(lines) + "\n"


def _toml_scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_scalar(v) for v in value) + "]"
    return json.dumps(str(value))


def _verify(plan: Plan, experiment_file: Path, profile: str | None, out: Path) -> dict:
    """Run the planned configuration through the normal runner and compare (the plan's check)."""
    text = derived_experiment(plan, experiment_file.read_text(encoding="utf-8"), profile)
    out.mkdir(parents=True, exist_ok=True)
    derived = out.parent / f"{out.name}.toml"
    derived.write_text(text, encoding="utf-8")
    print(f"plan: verifying with {derived} into {out}", file=sys.stderr, flush=True)
    experiment = parse_experiment(text, source=str(derived), default_name=derived.stem)
    run_experiment(experiment, out, resume=(out / "manifest.json").exists(), binaries=find_binaries())
    measured = summarize(load(out)).table.iloc[0]
    chosen = plan.chosen
    x, x_half = float(measured["throughput"]), float(measured.get("throughput_half_width", math.nan))
    r, r_half = float(measured["response_ms"]), float(measured.get("response_ms_half_width", math.nan))
    error = chosen.throughput / x - 1 if x else math.nan
    r_error = chosen.response_ms / r - 1 if r else math.nan
    failures = []
    if not x >= VERIFY_THROUGHPUT_SHARE * plan.target:
        failures.append(f"measured {x:,.0f}/s < {VERIFY_THROUGHPUT_SHARE:g} x target {plan.target:,.0f}/s")
    if plan.response_bound_ms is not None and not r <= plan.response_bound_ms:
        failures.append(f"measured response time {r:.3f} ms > bound {plan.response_bound_ms:g} ms")
    p99 = float(measured.get("response_p99_ms", math.nan))
    if plan.p99_bound_ms is not None and math.isfinite(p99) and p99 > plan.p99_bound_ms:
        failures.append(f"measured p99 {p99:.3f} ms > bound {plan.p99_bound_ms:g} ms")
    if not abs(error) <= VERIFY_PREDICTION_ERROR:
        failures.append(f"throughput predicted {chosen.throughput:,.0f}/s is {100 * error:+.1f}% off the measured")
    return {
        "experiment_file": str(derived), "results": str(out),
        "throughput": {"predicted": chosen.throughput, "predicted_interval": [chosen.throughput_low,
                                                                           chosen.throughput_high],
                       "measured": x, "measured_half_width": x_half, "error": error},
        "response_ms": {"predicted": chosen.response_ms, "predicted_interval": [chosen.response_ms_low,
                                                                             chosen.response_ms_high],
                        "measured": r, "measured_half_width": r_half, "error": r_error},
        "p99_ms": {"predicted": chosen.p99_ms, "measured": p99},
        "passed": not failures, "failures": failures,
    }


# ---------------------------------------------------------------- output for people


def _label(parameters: dict) -> str:
    shown = ("servers", "middlewares", "workers", "client_machines", "link_rate_mbit", "clients")
    names = {"client_machines": "client machines", "link_rate_mbit": "Mbit/s", "clients_per_thread": "clients/thread"}
    return ", ".join(f"{names.get(k, k)} {parameters[k]:g}" if isinstance(parameters[k], float)
                     else f"{names.get(k, k)} {parameters[k]}" for k in shown if k in parameters)


def _interval(low: float, value: float, high: float, digits: int = 0) -> str:
    if not math.isfinite(value):
        return "–"
    text = f"{value:,.{digits}f}"
    if math.isfinite(low) and math.isfinite(high) and high > low:
        text += f" [{low:,.{digits}f}, {high:,.{digits}f}]"
    return text


def _table(plan: Plan, plot: Path, verify: dict | None) -> str:
    bounds = [f"target {plan.target:,.0f} requests/s"]
    if plan.response_bound_ms is not None:
        bounds.append(f"mean response time ≤ {plan.response_bound_ms:g} ms")
    if plan.p99_bound_ms is not None:
        bounds.append(f"p99 ≤ {plan.p99_bound_ms:g} ms")
    lines = ["Plan: " + ", ".join(bounds), f"calibrated on: {_label(plan.base)}; varied: {', '.join(plan.knobs)}", ""]
    lines.append(f"{'candidate':<62} {'X model [interval]':>28} {'R ms':>8} {'bottleneck':<16} verdict")
    for c in plan.candidates:
        lines.append(f"{_label(c.parameters)[:62]:<62} "
                     f"{_interval(c.throughput_low, c.throughput, c.throughput_high):>28} "
                     f"{_interval(math.nan, c.response_ms, math.nan, 3):>8} {c.bottleneck[:16]:<16} {c.verdict}")
    lines.append("")
    if plan.chosen is None:
        lines.append("no candidate carries the target within the bounds")
    else:
        c = plan.chosen
        lines.append(f"plan: {_label(c.parameters)}: {_interval(c.throughput_low, c.throughput, c.throughput_high)} "
                     f"requests/s, {_interval(c.response_ms_low, c.response_ms, c.response_ms_high, 3)} ms "
                     f"(bottleneck {c.bottleneck})")
        if plan.next_smaller is not None:
            lines.append(f"next smaller: {_label(plan.next_smaller.parameters)}: {plan.next_smaller.verdict}")
    lines += [f"note: {note}" for note in plan.notes]
    lines.append(f"plot: {plot}")
    if verify:
        t, r = verify["throughput"], verify["response_ms"]
        lines += ["", "verify (predicted [interval] against measured ± half width):",
                  f"  throughput     {_interval(*t['predicted_interval'][:1], t['predicted'], t['predicted_interval'][1])}"
                  f"  vs  {t['measured']:,.0f} ± {t['measured_half_width']:,.0f}  ({100 * t['error']:+.1f}%)",
                  f"  response (ms)  {_interval(r['predicted_interval'][0], r['predicted'], r['predicted_interval'][1], 3)}"
                  f"  vs  {r['measured']:.3f} ± {r['measured_half_width']:.3f}  ({100 * r['error']:+.1f}%)",
                  "  check: " + ("passed" if verify["passed"] else "FAILED: " + "; ".join(verify["failures"]))]
    return "\n".join(lines)


def _plot(plan: Plan, path: Path) -> None:
    """The candidates' predicted throughput with intervals against the target, smallest first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    candidates = plan.candidates
    figure, axis = plt.subplots(figsize=(max(6, 0.6 * len(candidates) + 2), 4))
    xs = range(len(candidates))
    values = [c.throughput for c in candidates]
    low = [max(c.throughput - c.throughput_low, 0) if math.isfinite(c.throughput_low) else 0 for c in candidates]
    high = [max(c.throughput_high - c.throughput, 0) if math.isfinite(c.throughput_high) else 0 for c in candidates]
    colours = ["tab:green" if c.feasible else "tab:red" for c in candidates]
    axis.bar(xs, values, yerr=[low, high], color=colours, capsize=3)
    axis.axhline(plan.target, color="black", linestyle="--", label=f"target {plan.target:,.0f}/s")
    axis.set_xticks(list(xs), [_label(c.parameters).replace(", ", "\n") for c in candidates], fontsize=6)
    axis.set_ylabel("predicted throughput (requests/s)")
    axis.set_title("Candidates, smallest first (green: carries the target within the bounds)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
