"""The report section of seed 002 §3's per-server network, from a configuration built out of the
seed's printed inputs: Table 3 (N, Z, V) and Table 1 (E[s] get and set), Table 5 (X, R)
for the think time. The section's HTML is read as a static page.

What the seed prints and the section must give back: Z = N/X − R = 1.132 ms (3 servers) and
0.925 ms (7 servers) at 10 % writes, from Table 5's N, X and R; V get = 0.297 at 3 servers (the
design's 0.9 / 3 = 0.3, 1 % off: the seed counted visits from sampled logs). Its V set (0.04,
0.01) and its 7-server V get (0.1415) are not the design's shares: its V's sum over the queues
to 1.011 and 1.06, not 1, so the section's sum (1) is what is asserted. Table 4's results break
Little's law (see test_pools_per_server.py): the model's numbers are tested against the laws
they must obey instead."""

from types import SimpleNamespace

import pandas as pd
import pytest

from memrelay_lab.analysis import pools_per_server_table
from memrelay_lab.report._pools_per_server_section import pools_per_server_section
from memrelay_lab.report._render import render_html

# (servers) -> Table 5's X (req/s) and R (ms) at 10 % writes, Table 1's E[s] get and set (ms),
# Table 3's printed Z (ms) and V get, Table 1's sets in service.
SEED_002 = {3: (12478.6666667, 27.717, 3.141, 8.882, 1.132, 0.297, 3.76),
            7: (11102.3533333, 31.5005, 4.355, 9.818, 0.925, 0.1415, 2.449)}
REPLY_MS = 0.1  # the response queue's service time: the seed does not print it
THREADS = 16  # per GET queue (the seed's text)


def _row(servers: int) -> dict:
    x, r, get_ms, set_ms, _, _, in_service = SEED_002[servers]
    r_mw = 0.9 * (get_ms + REPLY_MS) + 0.1 * (set_ms + REPLY_MS)
    return {
        "configuration": servers, "clients": 360, "servers": servers, "workers": THREADS * servers,
        "middlewares": 1, "engine": "pool", "throughput": x, "response_ms": r, "sets_in_service": in_service,
        "mw_throughput": x, "mw_throughput_get": 0.9 * x, "mw_throughput_multiget": 0.0, "mw_throughput_set": 0.1 * x,
        "mw_response_get_ms": get_ms + REPLY_MS, "mw_queue_get_ms": 0.0,
        "mw_response_set_ms": set_ms + REPLY_MS, "mw_queue_set_ms": 0.0,
        "mw_response_ms": r_mw, "mw_queue_ms": 0.0, "mw_service_ms": r_mw - REPLY_MS,
    }


def _summary():
    table = pd.DataFrame([_row(3), _row(7)])
    return SimpleNamespace(table=table, pooled_table=lambda: table, display_columns=["servers"], swept=["servers"],
                           label=lambda row, columns=None: f"servers={row['servers']}")


@pytest.mark.parametrize("servers", [3, 7])
def test_inputs_are_seed_002_table_3(servers):
    frame = pools_per_server_table(_summary().pooled_table(), ["servers"]).set_index("servers")
    row = frame.loc[servers]
    x, r, get_ms, set_ms, z_printed, v_get_printed, in_service = SEED_002[servers]
    assert row["population"] == 360
    assert row["think_time_ms"] == pytest.approx(z_printed, abs=5e-4)  # printed with three decimals
    assert row["read_threads"] == THREADS
    # Table 1's E[s]; the set's over its sets in service, as test_pools_per_server.py's centres.
    assert row["get_service_ms"] == pytest.approx(get_ms)
    assert row["set_service_ms"] == pytest.approx(set_ms / in_service)
    assert row["response_queue_service_ms"] == pytest.approx(REPLY_MS)
    assert row["visits_get"] * servers + row["visits_set"] * servers == pytest.approx(1.0)
    if servers == 3:
        assert row["visits_get"] == pytest.approx(v_get_printed, rel=0.011)


@pytest.mark.parametrize("servers", [3, 7])
def test_model_obeys_the_operational_laws(servers):
    row = pools_per_server_table(_summary().pooled_table(), ["servers"]).set_index("servers").loc[servers]
    x = row["throughput_predicted"]
    outside = (row["think_time_ms"] + row["network_ms"]) / 1e3
    # Little's law on the closed loop: the jobs in the centres plus X (Z + network) are N.
    jobs = row["get_jobs"] + row["set_jobs"] + row["response_queue_jobs"]
    assert jobs + x * outside == pytest.approx(360, rel=1e-9)
    # and on the middleware: E[n] = X R.
    assert jobs == pytest.approx(x * row["response_ms_predicted"] / 1e3, rel=1e-9)
    # Forced flow and the utilization law (U = X V S / m per GET queue; X S at the response queue).
    assert row["get_throughput"] == pytest.approx(x * row["visits_get"])
    assert row["get_utilization"] == pytest.approx(x * row["visits_get"] * row["get_service_ms"] / 1e3 / THREADS)
    assert row["response_queue_utilization"] == pytest.approx(x * REPLY_MS / 1e3)
    # Counting the threads twice (the seed's S get / m) can only predict more.
    assert row["throughput_seed_normalised"] >= x
    # The bottleneck is the busiest device.
    busiest = max(("get", "set", "response_queue"), key=lambda k: row[f"{k}_utilization"])
    assert row["bottleneck"] == {"get": "GET queues", "set": "SET queues", "response_queue": "response queue"}[busiest]


def test_section_html_shows_the_seeds_inputs():
    section = pools_per_server_section(_summary())
    page = render_html("seed 002", [section], [])
    assert "Per-server network: GET M/M/m, SET M/M/1, a response queue" in page
    assert "seed 002 Table 3" in page and "seed 002 Tables 1 and 3" in page and "seed 002 Table 4" in page
    for text in ("1.132", "0.925", "3.141", "2.362", "4.355", "4.009", "3.760", "0.3000", "360", "GET (per queue)",
                 "SET (per queue)", "response queue"):
        assert f">{text}<" in page, text
    names = [t.name for t in section.items]
    assert names == ["pools_per_server_inputs", "pools_per_server_service", "pools_per_server_throughput",
                     "pools_per_server_devices"]
    assert all(len(t.frame.columns) <= 12 for t in section.items)  # each fits a page (test_report)


def test_sets_in_service_default_to_the_threads_per_server():
    # memrelay has no set thread: without the seed's column, a server's sets share its m threads.
    table = pd.DataFrame([{k: v for k, v in _row(3).items() if k != "sets_in_service"}])
    row = pools_per_server_table(table, ["servers"]).iloc[0]
    assert row["sets_in_service"] == THREADS and row["set_service_ms"] == pytest.approx(8.882 / THREADS)


def test_no_section_without_the_inputs():
    # No per-type middleware times (an experiment without middleware, or a proxy engine): no section.
    table = pd.DataFrame([{k: v for k, v in _row(3).items() if not k.startswith("mw_response_get")}])
    assert pools_per_server_section(SimpleNamespace(pooled_table=lambda: table, display_columns=["servers"])) is None
    proxy = pd.DataFrame([{**_row(3), "engine": "proxy"}])
    assert pools_per_server_table(proxy, ["servers"]) is None
