"""The consistency checks (analysis/_checks.py): each passes on consistent figures and fails on a
doctored copy; on a real experiment the laws hold between programs that count independently."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd
import pytest

from memrelay_lab.analysis import checks_frame, consistency_checks, net_thread_utilization_checks
from memrelay_lab.cli import main
from memrelay_lab.results import load


@dataclass
class FakeResults:
    runs: pd.DataFrame
    windows: pd.DataFrame
    servers: pd.DataFrame
    processes: pd.DataFrame = field(default_factory=pd.DataFrame)


def consistent(repetitions: int = 3) -> FakeResults:
    """A 16-client closed loop at X = 8,000/s and R = 2 ms (N = X R), seen alike by the clients,
    the middleware and two servers."""
    runs, windows, servers = [], [], []
    for rep in range(repetitions):
        run_id = f"c0-r{rep}"
        x = 8000.0 * (1 + 0.001 * rep)
        common = {"run_id": run_id, "configuration": 0, "repetition": rep, "clients": 16, "pipeline": 1, "multiget": 1}
        runs.append({**common, "source": "clients", "throughput": x, "response_ms": 16 / x * 1000,
                     "loaders": 2, "loaders_overlap": 0.998, "loaders_start_spread_s": 0.002})
        runs.append({**common, "source": "middleware", "throughput": x * 0.99, "response_ms": 1.5,
                     "in_system": x * 0.99 * 1.5e-3})
        for t in range(1, 5):
            windows.append({"run_id": run_id, "source": "clients", "t_s": t, "kept": True, "count": x, "length_s": 1.0})
        for server in range(2):
            servers.append({"run_id": run_id, "server": server, "cmd_get": 9000, "cmd_set": 1000,
                            "middleware_requests": 10000})
    # memrelay relays: it receives what the bench and the servers send, and sends what they receive.
    processes = []
    for rep in range(repetitions):
        for process, role, received, sent in (("client-0-0", "bench", 20e6, 2e6), ("server-0", "memcached", 1e6, 9e6),
                                              ("server-1", "memcached", 1e6, 9e6), ("middleware-0", "memrelay", 20e6, 22e6)):
            processes.append({"run_id": f"c0-r{rep}", "process": process, "role": role,
                              "received_bytes_per_s": received, "sent_bytes_per_s": sent})
    return FakeResults(pd.DataFrame(runs), pd.DataFrame(windows), pd.DataFrame(servers), pd.DataFrame(processes))


def verdicts(results: FakeResults) -> dict[str, set[str]]:
    frame = checks_frame(consistency_checks(results))
    return {name: set(group["verdict"]) for name, group in frame.groupby("check")}


def test_consistent_figures_pass_every_check():
    found = verdicts(consistent())
    assert found["Little's law at the clients"] == {"pass"}
    assert found["Flow balance: clients = middlewares"] == {"pass"}
    assert found["Flow balance: middlewares = servers"] == {"pass"}
    assert found["Stationarity of the kept windows"] == {"pass"}
    assert found["Confidence interval of throughput"] == {"pass"}
    assert found["Little's law inside memrelay"] == {"pass"}
    assert found["Byte balance through memrelay (in)"] == {"pass"}
    assert found["Byte balance through memrelay (out)"] == {"pass"}
    assert found["Load generators ran together"] == {"pass"}


def test_each_check_fails_on_a_doctored_copy():
    doctored = consistent()
    clients = doctored.runs["source"] == "clients"
    doctored.runs.loc[clients & (doctored.runs["repetition"] == 0), "response_ms"] *= 1.5  # R that N = X R refutes
    doctored.runs.loc[~clients & (doctored.runs["repetition"] == 1), "throughput"] /= 2  # a middleware losing requests
    # A count that starts later than R (the pool once counted from the queue, R from the first byte).
    doctored.runs.loc[~clients & (doctored.runs["repetition"] == 2), "in_system"] /= 1.36
    missed = (doctored.servers["run_id"] == "c0-r2") & (doctored.servers["server"] == 0)
    doctored.servers.loc[missed, ["cmd_get", "cmd_set"]] = 0  # a server that never saw its requests
    ramp = doctored.windows["run_id"] == "c0-r0"
    doctored.windows.loc[ramp, "count"] = doctored.windows.loc[ramp, "t_s"] * 2000.0  # still warming up
    lost = (doctored.processes["run_id"] == "c0-r1") & (doctored.processes["process"] == "client-0-0")
    doctored.processes = doctored.processes[~lost]  # a sampler that lost the bench's sockets
    apart = clients & (doctored.runs["repetition"] == 1)
    doctored.runs.loc[apart, ["loaders_overlap", "loaders_start_spread_s"]] = [0.6, 1.2]  # loads begun 1.2 s apart
    frame = checks_frame(consistency_checks(doctored))
    failed = frame[frame["verdict"] == "FAIL"]
    assert set(zip(failed["check"], failed["scope"])) >= {
        ("Little's law at the clients", "c0-r0"),
        ("Flow balance: clients = middlewares", "c0-r1"),
        ("Little's law inside memrelay", "c0-r2"),
        ("Flow balance: middlewares = servers", "c0-r2"),
        ("Stationarity of the kept windows", "c0-r0"),
        ("Confidence interval of response time", "configuration 0"),
        ("Byte balance through memrelay (in)", "c0-r1"),
        ("Byte balance through memrelay (out)", "c0-r1"),
        ("Load generators ran together", "c0-r1"),
    }


def test_a_wide_interval_says_how_many_repetitions_would_do():
    wide = consistent()
    clients = wide.runs["source"] == "clients"
    wide.runs.loc[clients, "throughput"] = [8000.0, 9000.0, 7000.0]
    frame = checks_frame(consistency_checks(wide, target=0.05))
    row = frame[frame["check"] == "Confidence interval of throughput"].iloc[0]
    assert row["verdict"] == "FAIL"
    # Half width t(0.975, 2) * s / sqrt(3) = 4.303 * 1000 / 1.732 = 2,484 over 8,000 = 0.3105;
    # (0.3105 / 0.05)^2 * 3 = 115.7 -> 116 repetitions.
    assert row["value"] == pytest.approx(0.3105, abs=1e-3)
    assert "needs ~116 or" in row["detail"]


def test_a_net_thread_demand_above_one_busy_server_fails():
    table = pd.DataFrame([{
        "configuration": 0, "clients": 32, "middlewares": 1, "workers": 32, "throughput": 10000.0,
        "response_ms": 3.2, "mw_throughput": 10000.0, "mw_response_ms": 3.0, "mw_queue_ms": 0.5, "mw_service_ms": 0.4,
    }])
    # The clock residual 3.0 - 0.5 - 0.4 = 2.1 ms at 10,000/s: X D = 21 for one thread.
    check = net_thread_utilization_checks(table)[0]
    assert check.passed is False and check.value == pytest.approx(21.0)


def test_check_on_a_real_experiment(report_results, capsys):
    results = load(report_results)
    # The shared experiment has no warm-up: memrelay sees the first requests some 0.1 s after
    # the bench's clock started, about 6% of its 2 s runs; hence the wider tolerance.
    frame = checks_frame(consistency_checks(results, tolerance=0.15))
    law = frame[frame["check"] == "Little's law at the clients"]
    assert len(law) == len(results.status) and set(law["verdict"]) == {"pass"}, law
    for name in ("Flow balance: clients = middlewares", "Flow balance: middlewares = servers",
                 "Byte balance through memrelay (in)", "Byte balance through memrelay (out)"):
        balance = frame[frame["check"] == name]
        assert set(balance["verdict"]) <= {"pass", "skipped"} and "pass" in set(balance["verdict"]), balance
    status = main(["check", str(report_results)])
    document = json.loads(capsys.readouterr().out)
    assert status == (1 if document["failed"] else 0)
    assert {"check", "scope", "value", "expected", "verdict"} <= set(document["checks"][0])


ENGINES_SPEC = """\
name = "engines-check"
description = "check: Little's law and flow balance on each engine"
servers = 2
client_machines = 1
instances_per_machine = 1
threads_per_instance = 2
clients_per_thread = 4
workload = "1:10"
middlewares = 1
workers = 4
engine = ["pool", "evented"]
repetitions = 1
test_time = 5
warmup = 1
cooldown = 1
keys = 1000
"""


# Why the engines run's flow between the clients and memrelay is not judged by its windowed
# check: memrelay's windows begin on its own clock, so the two that straddle the kept interval's
# ends (after the warm-up, before the cool-down) are counted in proportion to their overlap, as if
# their requests were spread evenly over them. Beside other work the rate is not even within a
# second, and over the 3 s this run keeps that is a large share: measured 6% off (0.937) beside a
# bursty CPU hog, while memrelay's own request log, counting the same interval exactly, agreed with
# the clients to 0.01%. The windows agree; the tolerance does not hold for a short kept interval
# on a busy machine. The test asserts instead the law the check rests on, over the whole run,
# where no window needs lining up, and that the check fails on a doctored copy. (The shared
# experiment above keeps its whole load, no window straddles an end: its check is judged.)
def assert_middlewares_counted_the_clients_requests(results) -> None:
    """Every run: memrelay (all its middlewares together) counted exactly the requests the
    benches counted, over the whole run (two programs counting on their own)."""
    totals = results.runs.set_index(["run_id", "source"])["count_total"]
    for run_id in results.runs["run_id"].unique():
        clients, middleware = totals[(run_id, "clients")], totals[(run_id, "middleware")]
        assert clients > 0 and middleware == clients, (run_id, clients, middleware)


def test_check_passes_the_laws_on_both_engines_and_fails_on_doctored_copies(tmp_path, capsys):
    """A small real run on each engine: `memrelay-lab check` passes Little's law at the clients
    and inside memrelay (memrelay counts a request inside from its first byte, the interval R
    covers, on both) and the flow between memrelay and the servers; memrelay counted exactly the
    clients' requests (the whole-run law under the windowed flow check, which is computed on
    every run; see above for why its verdict is not judged here). A copy of the results whose
    memrelay windows read fewer requests inside fails Little's law inside memrelay, and one whose
    middleware counted fewer requests fails the flow check: each check can fail."""
    import os
    import shutil

    from memrelay_lab import parse_experiment, run_experiment

    from conftest import binaries

    out = tmp_path / "engines"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(parse_experiment(ENGINES_SPEC, source="engines-check.toml"), out,
                                 binaries=binaries(), progress=quiet, handle_signals=False)
    assert summary.ok, summary.failures
    laws = ("Little's law at the clients", "Little's law inside memrelay", "Flow balance: middlewares = servers")
    windowed = "Flow balance: clients = middlewares"

    def verdicts(folder):
        main(["check", str(folder)])
        document = json.loads(capsys.readouterr().out)
        return [(c["check"], c["scope"], c["verdict"], c["value"]) for c in document["checks"]
                if c["check"] in (*laws, windowed)]

    found = verdicts(out)
    results = load(out)
    engines = {run["id"]: run["parameters"]["engine"] for run in results.manifest["runs"]}
    assert sorted(engines.values()) == ["evented", "pool"]
    # Every law passes on every run, on both engines (memrelay's in-system samples are the count
    # as of their own instants, so the pool's read no lower than the event loop's).
    judged = [(check, run_id, verdict) for check, run_id, verdict, _ in found if check in laws]
    assert {(check, verdict) for check, _, verdict in judged} == {(law, "pass") for law in laws}, found
    assert {(check, run_id) for check, run_id, _ in judged} == {(law, run_id) for law in laws for run_id in engines}
    # Between the clients and memrelay: the whole-run law, and the windowed check on every run.
    assert_middlewares_counted_the_clients_requests(results)
    flow = {run_id: verdict for check, run_id, verdict, _ in found if check == windowed}
    assert flow.keys() == engines.keys() and set(flow.values()) <= {"pass", "FAIL"}, found

    # A count that misses three requests in eight.
    for doctor, law in ((lambda w: w.update(in_system_mean=w["in_system_mean"] / 1.6), "Little's law inside memrelay"),
                        (lambda w: w.update(count=w["count"] // 2, types={k: {**t, "count": t["count"] // 2}
                                                                          for k, t in w["types"].items()}),
                         windowed)):
        copy = tmp_path / "doctored"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(out, copy)
        for windows in copy.glob("runs/*/middleware-*/windows.jsonl"):
            lines = [json.loads(line) for line in windows.read_text().splitlines()]
            for window in lines:
                if window.get("in_system_mean") is not None:
                    doctor(window)
            windows.write_text("".join(json.dumps(w) + "\n" for w in lines))
        failed = {(check, scope) for check, scope, verdict, _ in verdicts(copy) if verdict == "FAIL"}
        assert failed >= {(law, run_id) for run_id in engines}, (law, failed)
