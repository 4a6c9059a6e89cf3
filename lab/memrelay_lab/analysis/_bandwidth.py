"""What each measured link can carry, in the units seed 004 reasons in (its iperf3 table, §1.2:
"Maximum achievable bandwidth values for all machines").

The lab measures every link between the roles' hosts before the first run (a 1 s bulk transfer
with memrelay-bench --link-probe, as seed 004 ran iperf3). Seed 004 then reads a link's rate
as values per second: "each client can send at most 24MB per second ... As we send 4096B data
that means we can send ~6000 requests per machine" (§2.1), "the server can reply to at most
~3000 requests per second" at 12 MB/s. `bandwidth_table` gives, per measured link, Mbit/s,
MB/s (10^6 bytes) and the values per second of `value_size` bytes it carries: an upper bound on
sets through a link toward the servers and on get replies through a link from them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import pandas as pd

__all__ = ["bandwidth_table"]


def bandwidth_table(links: Iterable[Mapping], value_size: int | None) -> pd.DataFrame:
    """One row per measured link (loopback and failed probes left out): from, to, roles,
    ``Mbit/s``, ``MB/s`` and ``values/s`` (MB/s over the value size; NaN without one)."""
    rows = []
    for link in links:
        rate = link.get("mbit_per_s")
        if link.get("loopback") or "error" in link or rate is None or not math.isfinite(rate):
            continue
        megabytes = float(rate) / 8
        rows.append({"from": link.get("from", ""), "to": link.get("to", ""), "roles": link.get("roles", ""),
                     "Mbit/s": float(rate), "MB/s": megabytes,
                     "values/s": megabytes * 1e6 / value_size if value_size else math.nan})
    return pd.DataFrame(rows, columns=["from", "to", "roles", "Mbit/s", "MB/s", "values/s"])
