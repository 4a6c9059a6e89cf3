"""memrelay-lab: run memrelay experiments and analyse what they measured.

Subpackages by stage, each with its public names in its ``__init__``; a stage imports only
earlier ones (and `theory`, which imports nothing of the lab):

    experiment  spec -> configurations and runs -> processes on a host -> a results folder
    results     a results folder -> tables, merged histograms, statistics over repetitions
    theory      confidence intervals, M/M/1, M/M/m, MVA, 2^k r designs, the interactive law
    analysis    models and tables built from a results summary
    report      report.html / report.md of a results folder
    cli         the `memrelay-lab` command

The most used names are re-exported here.
"""

from .analysis import (
    Demands,
    MMTables,
    NetworkModel,
    NetworkModelError,
    interactive_law_table,
    measured_demands,
    mm_tables,
    models_from_summary,
    network_model,
)
from .experiment import (
    Configuration,
    Experiment,
    ExperimentSummary,
    Host,
    HostError,
    Interrupted,
    LocalHost,
    Run,
    SpecError,
    SSHHost,
    expand,
    load_experiment,
    parse_experiment,
    placement,
    plan,
    run_experiment,
)
from .report import Report, write_report
from .results import HdrHistogram, Histogram, Results, ResultsSummary, load, merged_buckets, merged_client_hdr, summarize
from .analysis import factorial_factors
from .theory import (
    MM1,
    AsymptoticBounds,
    Center,
    CenterKind,
    ConfidenceInterval,
    FactorialDesignError,
    FactorialResult,
    InteractiveLawCheck,
    MMm,
    MVAResult,
    UnstableSystemError,
    asymptotic_bounds,
    bottleneck,
    combine_latencies,
    combine_latency_std,
    confidence_interval_frame,
    estimate_think_time,
    factorial_design,
    factorial_from_responses,
    interactive_law,
    interactive_law_frame,
    mean_confidence_interval,
    mm1,
    mmm,
    mva,
    read_factorial_csv,
    think_time_from_law,
    weighted_mean,
)

__all__ = [
    # theory: means and confidence intervals over repetitions
    "ConfidenceInterval",
    "combine_latencies",
    "combine_latency_std",
    "confidence_interval_frame",
    "mean_confidence_interval",
    "weighted_mean",
    # theory: M/M/1 and M/M/m
    "MM1",
    "MMm",
    "UnstableSystemError",
    "mm1",
    "mmm",
    # theory: closed networks of queues
    "AsymptoticBounds",
    "Center",
    "CenterKind",
    "MVAResult",
    "asymptotic_bounds",
    "bottleneck",
    "mva",
    # theory: 2^k r designs
    "FactorialDesignError",
    "FactorialResult",
    "factorial_design",
    "factorial_from_responses",
    "read_factorial_csv",
    # theory: interactive response-time law
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
    "HostError",
    "Interrupted",
    "LocalHost",
    "SSHHost",
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
    "models_from_summary",
    "network_model",
    "summarize",
    "write_report",
]

