"""What a results folder holds, as tables: loading it, the histograms, and the statistics
over repetitions per configuration. Reads `experiment` (the parameters) and `theory`."""

from ._columns import configuration_columns, is_measure
from ._hdr import HdrHistogram
from ._histograms import (
    BUCKET_US,
    PERCENTILES,
    Histogram,
    bucket_histogram,
    merged_buckets,
    merged_client_hdr,
    percentile_columns,
)
from ._load import Results, load
from ._memcached_stats import parse_stats
from ._request_log import request_log
from ._summary import POPULATION, ResultsSummary, summarize

__all__ = [
    "BUCKET_US",
    "PERCENTILES",
    "POPULATION",
    "HdrHistogram",
    "Histogram",
    "Results",
    "ResultsSummary",
    "bucket_histogram",
    "configuration_columns",
    "is_measure",
    "load",
    "merged_buckets",
    "merged_client_hdr",
    "parse_stats",
    "percentile_columns",
    "request_log",
    "summarize",
]
