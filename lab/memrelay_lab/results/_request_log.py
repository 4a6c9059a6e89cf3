"""The requests the middlewares logged with their timestamps (memrelay's
``--request-log-sample N``: every N-th request, ``requests.csv`` beside each summary.json).

``request_log(results, run_id)`` returns the logged requests of one run that arrived inside the
trimmed interval (the warm-up and cool-down cut as for the means), all middlewares together,
one row each: ``middleware`` (its index), ``type`` (get, multiget, set, other), the timestamps
in µs since memrelay started (arrival, enqueue, dequeue, first_send, last_reply,
reply_written) and the three times memrelay measured: ``response_us`` (arrival to reply
written), ``queue_us`` (enqueue to dequeue) and ``service_us`` (first request sent to a server
to its last reply, the time in the servers). An empty frame when the run logged no requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

__all__ = ["request_log"]


def request_log(results, run_id: str) -> pd.DataFrame:
    """The logged requests of `run_id` inside its trimmed interval (module docstring)."""
    record = next((r for r in results.manifest["runs"] if r["id"] == run_id), None)
    if record is None or not record.get("files", {}).get("middlewares"):
        return pd.DataFrame()
    config = next(c for c in results.manifest["configurations"] if c["index"] == record["configuration"])
    clients = [json.loads((Path(results.path) / c["json"]).read_text()) for c in record["files"]["clients"]]
    load_start = min(c["start_unix_s"] for c in clients)
    parts = []
    for k, files in enumerate(record["files"]["middlewares"]):
        if "summary" not in files:  # a proxy measured from outside
            continue
        summary_path = Path(results.path) / files["summary"]
        log = summary_path.parent / "requests.csv"
        if not log.is_file():
            continue
        frame = pd.read_csv(log)
        if frame.empty:
            continue
        started = json.loads(summary_path.read_text())["started_unix"]
        t = frame["arrival_us"] / 1e6 + started - load_start
        kept = frame[(t >= config["warmup"]) & (t <= config["test_time"] - config["cooldown"])]
        parts.append(kept.assign(middleware=k))
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True)
