"""Link bandwidth in seed 004's units (its iperf3 table, §1.2): Mbit/s, MB/s and the values per
second a link carries, against the seed's numbers."""

import math

import pytest

from memrelay_lab.analysis import bandwidth_table
from memrelay_lab.report._machines_section import machines_overview

# Seed 004's table: machine, Mbit/s, MB/s, "effective" MB/s; and §2.1's readings of it with
# 4,096-byte values: "~6000 requests per machine" (client, 24 MB/s), "at most ~3000 requests
# per second" (server, 12 MB/s).
SEED_004 = {"client": (200, 25, 24), "middleware": (800, 100, 96), "server": (100, 12.5, 12)}
LINKS = [{"from": "lab", "to": role, "roles": role, "rtt_min_ms": 0.1, "rtt_median_ms": 0.2, "mbit_per_s": mbit}
         for role, (mbit, _, _) in SEED_004.items()]


def test_seed_004_iperf3_table_in_megabytes_and_values_per_second():
    table = bandwidth_table([*LINKS, {"from": "a", "to": "a", "loopback": True}], 4096).set_index("to")
    assert list(table.index) == ["client", "middleware", "server"]  # loopback left out
    for role, (mbit, megabytes, effective) in SEED_004.items():
        assert table.loc[role, "MB/s"] == pytest.approx(megabytes)
        # The seed's requests per second come from its effective rate (~96 % of the link's):
        # the raw rate's values per second are within 5 % of them.
        assert table.loc[role, "values/s"] == pytest.approx(effective * 1e6 / 4096, rel=0.05)
    assert table.loc["client", "values/s"] == pytest.approx(6000, rel=0.05)
    assert table.loc["server", "values/s"] == pytest.approx(3000, rel=0.05)
    assert math.isnan(bandwidth_table(LINKS, None)["values/s"].iloc[0])


def test_overview_shows_the_table_only_with_measured_links():
    manifest = {"environment": {"hosts": {"h1": {"roles": ["client"]}, "h2": {"roles": ["server"]}}, "links": LINKS}}
    _, tables = machines_overview(manifest, 4096)
    assert [t.name for t in tables] == ["hosts", "links", "link_bandwidth"]
    _, tables = machines_overview({"environment": {"hosts": manifest["environment"]["hosts"],
                                                   "links": [{"from": "a", "to": "b", "error": "refused"}]}}, 4096)
    assert "link_bandwidth" not in [t.name for t in tables]
