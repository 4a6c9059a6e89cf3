"""Numbers as the report and the CLI print them (report/_format.py), against hand-written text."""

from __future__ import annotations

import math

import pytest

from memrelay_lab.report import CI_TARGET, format_interval, format_number, interval_warning


@pytest.mark.parametrize(
    ("value", "name", "text"),
    [
        (17530.4, "throughput", "17,530"),
        (25188.0, "mw_throughput", "25,188"),
        (42.25, "Arrival rate λ (req/s)", "42.2"),
        (0.0443, "mw_queue_ms", "0.044"),
        (12.5, "Mean response time (ms)", "12.500"),
        (1234.5678, "response_ms", "1,234.568"),
        (3.209e-31, "Prob. of 0 jobs in system", "3.21e-31"),
        (0.7312, "Traffic intensity ρ", "0.7312"),
        (0.0, "miss_rate", "0.0000"),
        (1234567, "requests", "1,234,567"),
        (4.0, "clients", "4"),
        (0.00044, "mean_response_time", "0.00044"),
        (0.0000596, "waiting time (ms)", "0.000"),
        (0.0401, "90-percentile of response time (ms)", "0.040"),
        (0.000412, "variance of response time (ms²)", "0.000412"),
        (35.54712, "Var. of response time (ms²)", "35.547"),
        (0.0, "var_response_ms2_mm1", "0.000"),
        (93.5812, "variation_percent", "93.58"),
        (0.0, "Request queue length", "0.000"),
        (0.389, "mw_queue_length", "0.389"),
        (math.nan, "throughput", "–"),
        (math.inf, "response_ms", "∞"),
    ],
)
def test_numbers_follow_their_unit(value, name, text):
    assert format_number(value, name) == text


def test_relative_deviations_are_signed_percentages():
    assert format_number(-9.38e-05, "response_time_deviation", unit="relative") == "-0.01%"
    assert format_number(0.1234, unit="relative") == "+12.34%"


def test_intervals_wider_than_the_target_are_marked():
    assert CI_TARGET == 0.10
    assert format_interval(17530.0, 500.0, "throughput", 3) == "17,530 ± 500"
    assert format_interval(17530.0, 2100.0, "throughput", 3) == "17,530 ± 2,100 ⚠ ±12%"
    assert format_interval(1.2, math.nan, "response_ms", 1) == "1.200 (no interval)"
    assert interval_warning(10.0, 1.0, 5) == ""  # exactly 10 %: on target
    assert interval_warning(10.0, 12.4, 2) == "⚠ ±124%"
