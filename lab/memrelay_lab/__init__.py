"""memrelay-lab: run memrelay experiments and analyse what they measured."""

from ._factorial import (
    FactorialDesignError,
    FactorialResult,
    factorial_design,
    factorial_from_responses,
    read_factorial_csv,
)
from ._interactive import (
    InteractiveLawCheck,
    estimate_think_time,
    interactive_law,
    interactive_law_frame,
    think_time_from_law,
)
from ._mva import AsymptoticBounds, Center, CenterKind, MVAResult, asymptotic_bounds, bottleneck, mva
from ._queueing import MM1, MMm, UnstableSystemError, mm1, mmm
from ._stats import (
    ConfidenceInterval,
    combine_latencies,
    combine_latency_std,
    confidence_interval_frame,
    mean_confidence_interval,
    weighted_mean,
)
from ._expand import Configuration, Run, expand, placement, plan
from ._hdr import HdrHistogram
from ._hosts import Host, LocalHost
from ._load import Results, load
from ._runner import ExperimentSummary, Interrupted, run_experiment
from ._spec import Experiment, SpecError, load_experiment, parse_experiment
from ._histograms import Histogram, merged_buckets, merged_client_hdr
from ._model_builder import (
    Demands,
    MMTables,
    NetworkModel,
    NetworkModelError,
    measured_demands,
    mm_tables,
    models_from_results,
    network_model,
)
from ._report import Report, interactive_law_table, write_report
from ._summary import ResultsSummary, factorial_factors, summarize

__all__ = [
    # _stats: means and confidence intervals over repetitions
    "ConfidenceInterval",
    "combine_latencies",
    "combine_latency_std",
    "confidence_interval_frame",
    "mean_confidence_interval",
    "weighted_mean",
    # _queueing: M/M/1 and M/M/m
    "MM1",
    "MMm",
    "UnstableSystemError",
    "mm1",
    "mmm",
    # _mva: closed networks of queues
    "AsymptoticBounds",
    "Center",
    "CenterKind",
    "MVAResult",
    "asymptotic_bounds",
    "bottleneck",
    "mva",
    # _factorial: 2^k r designs
    "FactorialDesignError",
    "FactorialResult",
    "factorial_design",
    "factorial_from_responses",
    "read_factorial_csv",
    # _interactive: interactive response-time law
    "InteractiveLawCheck",
    "estimate_think_time",
    "interactive_law",
    "interactive_law_frame",
    "think_time_from_law",
    # experiments: files, runs, running, results
    "Configuration",
    "Experiment",
    "ExperimentSummary",
    "HdrHistogram",
    "Host",
    "Interrupted",
    "LocalHost",
    "Results",
    "Run",
    "SpecError",
    "expand",
    "load",
    "load_experiment",
    "parse_experiment",
    "placement",
    "plan",
    "run_experiment",
    # reports: statistics per configuration, merged histograms, models from results, report.html
    "Demands",
    "Histogram",
    "MMTables",
    "NetworkModel",
    "NetworkModelError",
    "Report",
    "ResultsSummary",
    "factorial_factors",
    "interactive_law_table",
    "measured_demands",
    "merged_buckets",
    "merged_client_hdr",
    "mm_tables",
    "models_from_results",
    "network_model",
    "summarize",
    "write_report",
]

