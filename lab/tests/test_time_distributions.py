"""Queue and server time distributions (seed 001 §1.3) against hand-computed statistics of a
request log written here."""

import json
import math

import numpy as np
import pytest

from memrelay_lab.analysis import distribution_statistics, time_distributions
from memrelay_lab.results import load, request_log, summarize


def test_statistics_by_hand():
    # 1..10 ms: mean 5.5, population std sqrt(8.25); order statistics: 50% -> 5th, 90% -> 9th, 99% -> 10th.
    statistics = distribution_statistics(np.arange(1.0, 11.0))
    assert statistics == {"requests": 10, "mean_ms": 5.5, "std_ms": pytest.approx(math.sqrt(8.25)),
                          "p50_ms": 5.0, "p90_ms": 9.0, "p99_ms": 10.0}
    assert distribution_statistics(np.array([]))["requests"] == 0


HEADER = ("thread,type,keys,hits,misses,error,servers,arrival_us,enqueue_us,dequeue_us,first_send_us,"
          "last_reply_us,reply_written_us,response_us,queue_us,service_us")


def _log_line(kind, arrival_s, queue_us, service_us):
    arrival = int(arrival_s * 1e6)
    dequeue = arrival + 1 + queue_us
    reply = dequeue + 2 + service_us
    return (f"1,{kind},1,1,0,0,1,{arrival},{arrival + 1},{dequeue},{dequeue + 2},{reply},{reply + 3},"
            f"{reply + 3 - arrival},{queue_us},{service_us}")


def test_only_the_trimmed_interval_of_every_repetition_is_pooled(report_results, tmp_path):
    """Rewrite the shared experiment's request logs with known times, one outside the kept interval."""
    import shutil

    folder = tmp_path / "results"
    shutil.copytree(report_results, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    configurations = {c["index"]: c for c in manifest["configurations"]}
    run = manifest["runs"][0]
    config = configurations[run["configuration"]]
    load_start = min(json.loads((folder / c["json"]).read_text())["start_unix_s"] for c in run["files"]["clients"])
    summary_path = folder / run["files"]["middlewares"][0]["summary"]
    started = json.loads(summary_path.read_text())["started_unix"]
    inside = load_start - started + config["warmup"] + 0.5  # seconds since memrelay started
    outside = load_start - started + config["test_time"] + 5
    lines = [_log_line("get", inside, q, s) for q, s in ((10, 100), (20, 200), (30, 300), (40, 400))]
    lines += [_log_line("set", inside, 5, 500), _log_line("get", outside, 9999, 9999)]
    (summary_path.parent / "requests.csv").write_text("\n".join([HEADER, *lines]) + "\n")
    # Only the first run's first middleware logged requests (an empty log counts as none).
    for other in manifest["runs"]:
        for files in other["files"]["middlewares"]:
            log = (folder / files["summary"]).parent / "requests.csv"
            if log.parent != summary_path.parent:
                log.write_text(HEADER + "\n")

    results = load(folder)
    assert len(request_log(results, run["id"])) == 5
    frame = time_distributions(summarize(results))
    gets = frame[(frame["configuration"] == run["configuration"]) & (frame["type"] == "get")].set_index("time")
    assert gets.loc["queue", "requests"] == 4
    assert gets.loc["queue", "mean_ms"] == pytest.approx(0.025)
    assert gets.loc["queue", "std_ms"] == pytest.approx(np.std([0.01, 0.02, 0.03, 0.04]))
    assert gets.loc["server", "p50_ms"] == pytest.approx(0.2)  # 2nd of 4
    assert gets.loc["server", "p90_ms"] == pytest.approx(0.4)
    # T_total = 1 + queue + 2 + service + 3 µs
    assert gets.loc["total", "mean_ms"] == pytest.approx((6 + 25 + 250) / 1e3)
    sets = frame[(frame["configuration"] == run["configuration"]) & (frame["type"] == "set")]
    assert sets.set_index("time").loc["server", "mean_ms"] == pytest.approx(0.5)
