"""HdrHistogram: decoding memrelay-bench's histograms, merging them, and their percentiles.

memrelay-bench writes each histogram in HdrHistogram's standard compressed form
(V2 + deflate, base64: the ``HISTF...`` strings of HdrHistogram logs). This module decodes
that form (the layout is HdrHistogram's, as implemented by the Java, C and Rust libraries):

- 4-byte big-endian cookie 0x1c849304, 4-byte length, then a zlib stream holding
- the V2 encoding: cookie 0x1c849303, payload length, normalizing index offset,
  significant digits (4 bytes each), lowest and highest trackable value (8 bytes each),
  integer-to-double ratio (8-byte double), then the counts as ZigZag LEB128 varints
  (at most 9 bytes; a negative number -n stands for n empty buckets).

Histograms with the same bounds merge by adding their count arrays; percentiles follow
HdrHistogram's ``value_at_quantile`` (the highest value equivalent to the bucket where the
cumulative count first reaches ceil(q x total)), so a decoded histogram reproduces the
percentiles the bench itself reported.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from dataclasses import dataclass

import numpy as np

__all__ = ["HdrHistogram"]

_COMPRESSED_COOKIE = 0x1C849304
_V2_COOKIE = 0x1C849303
_HEADER = struct.Struct(">iiiiqqd")


@dataclass
class HdrHistogram:
    """Counts over HdrHistogram's bucket layout for (lowest, highest, significant digits)."""

    lowest: int
    highest: int
    significant_digits: int
    counts: np.ndarray  # int64, one per bucket index

    # ---- layout

    @property
    def _unit_magnitude(self) -> int:
        return int(math.floor(math.log2(self.lowest)))

    @property
    def _sub_bucket_half_count_magnitude(self) -> int:
        largest_single_unit = 2 * 10**self.significant_digits
        return max(int(math.ceil(math.log2(largest_single_unit))), 1) - 1

    def _bucket_of_index(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        half_magnitude = self._sub_bucket_half_count_magnitude
        half = 1 << half_magnitude
        bucket = (index >> half_magnitude) - 1
        sub_bucket = (index & (half - 1)) + half
        low = bucket < 0
        sub_bucket = np.where(low, sub_bucket - half, sub_bucket)
        bucket = np.where(low, 0, bucket)
        return bucket, sub_bucket

    def values(self) -> np.ndarray:
        """The lowest value of every bucket index."""
        bucket, sub_bucket = self._bucket_of_index(np.arange(len(self.counts), dtype=np.int64))
        return sub_bucket << (bucket + self._unit_magnitude)

    def highest_equivalent(self) -> np.ndarray:
        """The highest value of every bucket index."""
        bucket, sub_bucket = self._bucket_of_index(np.arange(len(self.counts), dtype=np.int64))
        unit = bucket + self._unit_magnitude
        return (sub_bucket << unit) + (np.int64(1) << unit) - 1

    # ---- reading and combining

    @classmethod
    def decode(cls, text: str) -> "HdrHistogram":
        """Decode a base64 V2-deflate histogram (``HISTF...``)."""
        raw = base64.b64decode(text)
        cookie, length = struct.unpack_from(">ii", raw, 0)
        if cookie & ~0xF0 != _COMPRESSED_COOKIE & ~0xF0:
            raise ValueError(f"not a compressed HdrHistogram (cookie {cookie:#x})")
        data = zlib.decompress(raw[8 : 8 + length])
        cookie, payload_length, normalizing_offset, digits, lowest, highest, _ = _HEADER.unpack_from(data, 0)
        if cookie & ~0xF0 != _V2_COOKIE & ~0xF0:
            raise ValueError(f"not a V2 HdrHistogram encoding (cookie {cookie:#x})")
        if normalizing_offset != 0:
            raise ValueError("normalized (shifted) histograms are not supported")
        counts = _decode_counts(data[_HEADER.size : _HEADER.size + payload_length])
        histogram = cls(int(lowest), int(highest), int(digits), np.zeros(0, dtype=np.int64))
        histogram.counts = np.asarray(counts, dtype=np.int64)
        return histogram

    def merged(self, other: "HdrHistogram") -> "HdrHistogram":
        """A histogram with both histograms' counts (their bounds must agree)."""
        if (self.lowest, self.significant_digits) != (other.lowest, other.significant_digits):
            raise ValueError("histograms with different layouts cannot be merged")
        size = max(len(self.counts), len(other.counts))
        counts = np.zeros(size, dtype=np.int64)
        counts[: len(self.counts)] += self.counts
        counts[: len(other.counts)] += other.counts
        return HdrHistogram(self.lowest, max(self.highest, other.highest), self.significant_digits, counts)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def value_at_quantile(self, quantile: float) -> float:
        """HdrHistogram's value at ``quantile`` (0..1); NaN for an empty histogram."""
        total = self.total
        if total == 0:
            return math.nan
        quantile = min(max(quantile, 0.0), 1.0)
        wanted = max(int(math.ceil(quantile * total)), 1)
        index = int(np.searchsorted(np.cumsum(self.counts), wanted))
        if quantile == 0.0:
            return float(self.values()[index])
        return float(self.highest_equivalent()[index])

    def mean(self) -> float:
        """Mean over bucket midpoints (HdrHistogram's own estimate); NaN when empty."""
        total = self.total
        if total == 0:
            return math.nan
        lows, highs = self.values(), self.highest_equivalent()
        return float(((lows + highs + 1) / 2 * self.counts).sum() / total)

    def std(self) -> float:
        """Standard deviation over bucket midpoints (HdrHistogram's getStdDeviation); NaN when
        empty."""
        total = self.total
        if total == 0:
            return math.nan
        middles = (self.values() + self.highest_equivalent() + 1) / 2
        mean = float((middles * self.counts).sum() / total)
        return float(math.sqrt(((middles - mean) ** 2 * self.counts).sum() / total))


def _decode_counts(payload: bytes) -> list[int]:
    counts: list[int] = []
    position, end = 0, len(payload)
    while position < end:
        value, shift = 0, 0
        for byte_number in range(9):
            byte = payload[position]
            position += 1
            if byte_number == 8:
                value |= byte << 56
                break
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        value = (value >> 1) ^ -(value & 1)  # ZigZag
        if value < 0:
            counts.extend([0] * (-value))
        else:
            counts.append(value)
    return counts
