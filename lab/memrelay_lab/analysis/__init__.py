"""Analyses of a results summary: the queueing models built from the measurements, the
interactive-law and factorial tables. Reads `results` and `theory`; never loads a folder."""

from ._bandwidth import bandwidth_table
from ._checks import DEFAULT_TARGET as DEFAULT_CHECK_TARGET
from ._checks import Check, checks_frame, consistency_checks, net_thread_utilization_checks
from ._factorial_models import (
    ExtremeDesign,
    ModelFit,
    compare_models,
    extreme_design,
    extreme_designs,
    extreme_levels,
    fits_of,
)
from ._levels import write_share
from ._factorial_tables import RESPONSES as FACTORIAL_RESPONSES
from ._factorial_tables import FactorialPlan, factorial_factors, factorial_results
from ._max_throughput import MaxThroughput, best_per_group, knee_table, max_throughput, maximum_table, summary_groups
from ._mix_models import mix_models
from ._mixed import mixed_workload_table
from ._mm_tables import MMTables, mm_tables
from ._models import models_from_summary
from ._pools_per_server import (
    pools_per_server_centers,
    pools_per_server_network,
    pools_per_server_table,
    seed_think_time_ms,
)
from ._per_server_load import process_utilization, queue_length_series, server_load
from ._server_visits import server_centers, server_demands, server_network, visit_ratios
from ._links import link_demands
from ._network import Demands, NetworkModel, build_centers, link_columns, measured_demands, network_model
from ._inputs import NetworkModelError, config_columns_of
from ._predict import Prediction, named_bottlenecks, predict_configurations, predictions_frame
from ._plan import Candidate, Plan, RoleHostCounts, candidate_demands, plan_capacity
from ._tables import interactive_law_table, model_metric_table
from ._relative import RELATIVE_MEASURES, relative_differences
from ._response_statistics import response_statistics
from ._trace import TRACE_MEASURES, trace_frame, trace_statistics
from ._time_distributions import (
    REQUEST_TIMES,
    distribution_statistics,
    logged_requests,
    summary_time_distributions,
    time_distributions,
)

__all__ = [
    "Candidate",
    "Plan",
    "RoleHostCounts",
    "candidate_demands",
    "plan_capacity",
    "bandwidth_table",
    "RELATIVE_MEASURES",
    "relative_differences",
    "response_statistics",
    "TRACE_MEASURES",
    "trace_frame",
    "trace_statistics",
    "FACTORIAL_RESPONSES",
    "ExtremeDesign",
    "ModelFit",
    "compare_models",
    "extreme_design",
    "extreme_designs",
    "write_share",
    "extreme_levels",
    "fits_of",
    "pools_per_server_centers",
    "pools_per_server_network",
    "pools_per_server_table",
    "seed_think_time_ms",
    "process_utilization",
    "queue_length_series",
    "server_centers",
    "server_demands",
    "server_network",
    "server_load",
    "visit_ratios",
    "REQUEST_TIMES",
    "distribution_statistics",
    "logged_requests",
    "time_distributions",
    "summary_time_distributions",
    "DEFAULT_CHECK_TARGET",
    "Check",
    "MaxThroughput",
    "Demands",
    "FactorialPlan",
    "MMTables",
    "NetworkModel",
    "NetworkModelError",
    "Prediction",
    "build_centers",
    "checks_frame",
    "config_columns_of",
    "consistency_checks",
    "factorial_factors",
    "factorial_results",
    "interactive_law_table",
    "max_throughput",
    "maximum_table",
    "best_per_group",
    "knee_table",
    "summary_groups",
    "measured_demands",
    "mix_models",
    "mixed_workload_table",
    "mm_tables",
    "model_metric_table",
    "models_from_summary",
    "net_thread_utilization_checks",
    "network_model",
    "link_columns",
    "link_demands",
    "named_bottlenecks",
    "predict_configurations",
    "predictions_frame",
]
