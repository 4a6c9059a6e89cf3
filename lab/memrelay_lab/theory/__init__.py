"""Textbook performance analysis, independent of memrelay: confidence intervals, M/M/1 and
M/M/m, mean-value analysis of closed networks, networks whose thread pools share the
processors (approximate, with an exact Markov-chain reference), 2^k r factorial designs, the interactive
response-time law. Imports nothing else from the lab."""

from ._factorial import (
    FactorialDesignError,
    FactorialResult,
    factorial_design,
    factorial_from_responses,
    read_factorial_csv,
)
from ._interactive import (
    DEFAULT_TOLERANCE,
    InteractiveLawCheck,
    estimate_think_time,
    interactive_law,
    interactive_law_frame,
    think_time_from_law,
)
from ._mix import mix_mm1, mix_mmm, mix_service_rate
from ._mva import AsymptoticBounds, Center, CenterKind, MVAResult, asymptotic_bounds, bottleneck, mva
from ._queueing import DEFAULT_PERCENTILES, MM1, MMm, UnstableSystemError, mm1, mmm
from ._shared_cpu import SharedCpuResult, Stage, exact_throughput, shared_cpu_network
from ._stats import (
    ConfidenceInterval,
    combine_latencies,
    combine_latency_std,
    confidence_interval_frame,
    mean_confidence_interval,
    weighted_mean,
)

__all__ = [
    "DEFAULT_PERCENTILES",
    "DEFAULT_TOLERANCE",
    "AsymptoticBounds",
    "Center",
    "CenterKind",
    "ConfidenceInterval",
    "FactorialDesignError",
    "FactorialResult",
    "InteractiveLawCheck",
    "MM1",
    "MMm",
    "MVAResult",
    "SharedCpuResult",
    "Stage",
    "UnstableSystemError",
    "asymptotic_bounds",
    "bottleneck",
    "combine_latencies",
    "combine_latency_std",
    "confidence_interval_frame",
    "estimate_think_time",
    "exact_throughput",
    "factorial_design",
    "factorial_from_responses",
    "interactive_law",
    "interactive_law_frame",
    "mean_confidence_interval",
    "mix_mm1",
    "mix_mmm",
    "mix_service_rate",
    "mva",
    "mm1",
    "mmm",
    "read_factorial_csv",
    "shared_cpu_network",
    "think_time_from_law",
    "weighted_mean",
]
