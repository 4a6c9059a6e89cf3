"""Analyses of a results summary: the queueing models built from the measurements, the
interactive-law and factorial tables. Reads `results` and `theory`; never loads a folder."""

from ._factorial_tables import FactorialPlan, factorial_factors, factorial_results
from ._mm_tables import MMTables, mm_tables
from ._models import models_from_summary
from ._network import Demands, NetworkModel, build_centers, measured_demands, network_model
from ._inputs import NetworkModelError, config_columns_of
from ._tables import interactive_law_table, model_metric_table

__all__ = [
    "Demands",
    "FactorialPlan",
    "MMTables",
    "NetworkModel",
    "NetworkModelError",
    "build_centers",
    "config_columns_of",
    "factorial_factors",
    "factorial_results",
    "interactive_law_table",
    "measured_demands",
    "mm_tables",
    "model_metric_table",
    "models_from_summary",
    "network_model",
]
