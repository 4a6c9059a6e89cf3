"""HdrHistogram decoding against the format's definition, an encoder written here from the
specification, and order statistics computed directly. (The end-to-end test also checks the
decoded percentiles against the ones memrelay-bench's Rust HdrHistogram reported.)"""

import base64
import math
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memrelay_lab import HdrHistogram


def zigzag_leb128(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    for _ in range(8):
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
    out.append(encoded & 0xFF)
    return bytes(out)


def encode(counts: list[int], lowest=1, highest=3_600_000_000, digits=3) -> str:
    """The V2 + deflate + base64 form, written from HdrHistogram's specification."""
    payload = bytearray()
    zeros = 0
    for count in counts:
        if count == 0:
            zeros += 1
            continue
        if zeros:
            payload += zigzag_leb128(-zeros) if zeros > 1 else zigzag_leb128(0)
            zeros = 0
        payload += zigzag_leb128(count)
    header = struct.pack(">iiiiqqd", 0x1C849303, len(payload), 0, digits, lowest, highest, 1.0)
    body = zlib.compress(header + bytes(payload))
    return base64.b64encode(struct.pack(">ii", 0x1C849304, len(body)) + body).decode()


def test_layout_for_microseconds_with_three_digits():
    histogram = HdrHistogram(1, 3_600_000_000, 3, np.zeros(5000, dtype=np.int64))
    values = histogram.values()
    # Exact up to 2047; then steps of 2 up to 4094, steps of 4 from 4096.
    assert list(values[:2048]) == list(range(2048))
    assert list(values[2048:2051]) == [2048, 2050, 2052]
    assert values[3071] == 4094 and values[3072] == 4096 and values[3073] == 4100
    assert histogram.highest_equivalent()[2048] == 2049
    assert histogram.highest_equivalent()[3072] == 4099


def test_decodes_counts_with_zero_runs():
    counts = [0, 3, 0, 0, 0, 7, 1] + [0] * 100 + [2]
    histogram = HdrHistogram.decode(encode(counts))
    assert list(histogram.counts) == counts
    assert (histogram.lowest, histogram.highest, histogram.significant_digits) == (1, 3_600_000_000, 3)
    assert histogram.total == 13


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=2047), min_size=1, max_size=300))
def test_percentiles_are_order_statistics_below_2048(samples):
    counts = np.bincount(samples, minlength=2048).tolist()
    histogram = HdrHistogram.decode(encode(counts))
    ordered = sorted(samples)
    for q in (0.5, 0.9, 0.99, 0.999, 1.0):
        rank = max(math.ceil(q * len(ordered)), 1)
        assert histogram.value_at_quantile(q) == ordered[rank - 1]
    assert histogram.mean() == pytest.approx(np.mean(samples) + 0.5)  # bucket midpoints of width 1
    assert histogram.std() == pytest.approx(np.std(samples), abs=1e-9)  # shifting by 0.5 keeps the spread


def test_merging_adds_counts():
    a = HdrHistogram.decode(encode([0, 1, 2]))
    b = HdrHistogram.decode(encode([5, 0, 0, 0, 4]))
    merged = a.merged(b)
    assert list(merged.counts) == [5, 1, 2, 0, 4]
    # 12 values: 0 x5, 1, 2 x2, 4 x4; the 6th (ceil(0.5 x 12)) is 1.
    assert merged.value_at_quantile(0.5) == 1 and merged.value_at_quantile(1.0) == 4


def test_empty_histogram_has_no_percentiles():
    histogram = HdrHistogram.decode(encode([]))
    assert histogram.total == 0 and math.isnan(histogram.value_at_quantile(0.5))


def test_rejects_other_data():
    with pytest.raises(ValueError, match="compressed HdrHistogram"):
        HdrHistogram.decode(base64.b64encode(b"\x00" * 16).decode())


def test_middleware_percentiles_come_from_the_windows_hdrhistograms(report_results):
    """memrelay writes each window's response times as an HdrHistogram and, at shutdown, its
    whole-run 100 µs buckets. Every request lands in exactly one window, so all the windows'
    histograms merged hold the same requests as the buckets: the same count, and percentiles
    within a bucket. The lab's middleware percentiles merge the windows the kept interval keeps,
    so they lie between the lowest and the highest window's. And the middlewares' time is part
    of the clients': over the same requests (every window of every middleware against the
    clients' whole-run histograms) each quantile lies below the clients'.

    (The kept windows against the whole-run buckets, or one middleware against all the clients,
    compare different requests, and failed fresh clones: 0.668 against 0.807 ms, 0.694 against
    0.645 ms.)"""
    import json

    from memrelay_lab.results import bucket_histogram, load
    from memrelay_lab.results._load import _summary_buckets

    results = load(report_results)
    middleware = results.runs[results.runs["source"] == "middleware-0"].set_index("run_id")
    clients = results.runs[results.runs["source"] == "clients"].set_index("run_id")
    quantiles = (("p50", 0.50), ("p90", 0.90))

    def windows_of(files):
        lines = (report_results / files["windows"]).read_text().splitlines()
        return [HdrHistogram.decode(w["response_hdr"]) for w in map(json.loads, lines) if w.get("response_hdr")]

    for record in results.manifest["runs"]:
        every_middleware = None
        for m, files in enumerate(record["files"]["middlewares"]):
            windows = windows_of(files)
            assert windows, (record["id"], m)
            merged = windows[0]
            for histogram in windows[1:]:
                merged = merged.merged(histogram)
            every_middleware = merged if every_middleware is None else every_middleware.merged(merged)
            summary = json.loads((report_results / files["summary"]).read_text())
            buckets = bucket_histogram([(lower, count) for _, lower, count in _summary_buckets(summary, None)])
            assert merged.total == summary["totals"]["count"], (record["id"], m)
            for name, q in quantiles:
                # One 100 µs bucket, and HdrHistogram's three significant digits.
                assert abs(merged.value_at_quantile(q) - buckets.percentile(100 * q)) <= 100 + 0.001 * merged.value_at_quantile(q), (record["id"], m, name)
                if m == 0:
                    by_window = [w.value_at_quantile(q) / 1000 for w in windows if w.total]
                    assert min(by_window) <= middleware.loc[record["id"], f"response_{name}_ms"] <= max(by_window), (record["id"], name)
        for name, q in quantiles:
            # The clients' histograms also round to three significant digits.
            assert every_middleware.value_at_quantile(q) / 1000 <= clients.loc[record["id"], f"response_{name}_ms"] * 1.002, (record["id"], name)
