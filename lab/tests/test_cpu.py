"""Processor time per process (experiment/_cpu.py): the sampler's figure for a process against
the process's own account of its CPU time (time.process_time, from getrusage, read inside it)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from memrelay_lab.experiment import CpuSampler, machine_cores, thread_role

CHILD = """
import sys, time
print(time.process_time(), flush=True)          # before
sys.stdin.readline()                             # go
spin_until = time.process_time() + 0.2
while time.process_time() < spin_until:
    pass
print(time.process_time(), flush=True)          # after
time.sleep(10)
"""


def test_the_sampled_cpu_time_is_what_the_process_itself_counted():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        before = float(child.stdout.readline())
        now = time.time()
        sampler = CpuSampler({"server-0": child.pid}, start=now + 0.1, end=now + 6.0)
        sampler.begin()
        time.sleep(0.3)  # after the first snapshot
        child.stdin.write("go\n")
        child.stdin.flush()
        after = float(child.stdout.readline())
        document = sampler.finish()
    finally:
        child.kill()
        child.wait()
    assert document is not None
    record = document["processes"]["server-0"]
    assert record["role"] == "memcached"
    # Clock-tick accounting (10 ms) on both snapshots.
    assert record["cpu_s"] == pytest.approx(after - before, abs=0.03)
    assert document["cores"] == machine_cores() and document["cores"]["usable"] >= 1


def test_memrelay_threads_have_roles():
    assert [thread_role(n) for n in ("memrelay", "worker-3", "loop-0", "stats", "probe")] == [
        "net", "worker", "loop", "other", "other"]


def test_a_real_run_records_what_memcached_counted_itself(report_results):
    """The shared experiment keeps its whole load (no warm-up, no cool-down), the span the lab's
    `stats` snapshots of each memcached bracket: memcached's own rusage over it is the reference."""
    import json

    from memrelay_lab.results import load, parse_stats

    results = load(report_results)
    clients = results.runs[results.runs["source"] == "clients"]
    assert (clients["cpu_memcached_us"] > 0).all() and (clients["cpu_cores_busy"] > 0).all()
    for record in results.manifest["runs"]:
        run_dir = report_results
        sampled = json.loads((run_dir / record["files"]["cpu"]).read_text())["processes"]
        for j, server in enumerate(record["files"]["servers"]):
            before = parse_stats((run_dir / server["stats_before"]).read_text())
            after = parse_stats((run_dir / server["stats_after"]).read_text())
            own = sum(float(after[k]) - float(before[k]) for k in ("rusage_user", "rusage_system"))
            document = json.loads((run_dir / record["files"]["cpu"]).read_text())
            load_s = max(json.loads((run_dir / c["json"]).read_text())["duration_s"] for c in record["files"]["clients"])
            # memcached's stats bracket the whole load; the lab's snapshots are taken at the kept
            # interval's ends, inside the load give or take a few tenths of a second on a busy
            # machine, when memcached is idle. So what the lab read over its interval is at most
            # what memcached counted over the whole load, and at least a good part of its share of
            # it (the load's rate is not even over time on a loaded machine: rates compared at
            # ±15 % failed there). A wrong process, a wrong unit or a lost reading falls outside.
            first, last = document["interval_unix"]
            cpu = sampled[f"server-{j}"]["cpu_s"]
            share = min(1.0, (last - first) / load_s)
            assert own * share * 0.5 <= cpu <= own * 1.25 + 0.02, (record["id"], cpu, own, share)
            # memcached counts the protocol bytes it read and wrote itself, the TCP payload, over the
            # whole load; the lab's network snapshots cover the load but its first and last quarter
            # second: the same bounds.
            start, end = document["network_interval_unix"]
            share = min(1.0, (end - start) / load_s)
            for ours, theirs in (("received_bytes", "bytes_read"), ("sent_bytes", "bytes_written")):
                counted = float(after[theirs]) - float(before[theirs])
                got = sampled[f"server-{j}"][ours]
                assert counted * share * 0.5 <= got <= counted * 1.25, (record["id"], ours, got, counted, share)


def _wait_for_network_readings(sampler: CpuSampler, count: int) -> None:
    deadline = time.time() + 10
    while len(sampler._network) < count:
        assert time.time() < deadline, "the sampler took no network reading"
        time.sleep(0.005)


NET_CHILD = """
import socket, sys
peer = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
sys.stdin.readline()                             # go
peer.sendall(b"x" * 100_000)
received = 0
while received < 7_777:
    received += len(peer.recv(65536))
print("done", flush=True)
sys.stdin.readline()
"""


def _exchange_with_child(interval_s: float, leave_early: bool) -> dict:
    """Sample a child that sends the test 100,000 bytes and receives 7,777 between the two
    network readings; with `leave_early` it is killed after the second network reading, before
    the last processor snapshot. The child's record in cpu.json."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    child = subprocess.Popen(
        [sys.executable, "-c", NET_CHILD, str(listener.getsockname()[1])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        peer, _ = listener.accept()
        now = time.time()
        sampler = CpuSampler({"client-0-0": child.pid}, start=now + 0.1, end=now + 0.1 + interval_s)
        exchanged, gone = threading.Event(), threading.Event()
        # The second network reading waits for the exchange (on a busy machine it may take longer
        # than the interval), as a load generator's bytes fall within its kept interval.
        take_network = sampler._take_network
        sampler._take_network = lambda: (sampler._network and exchanged.wait(30), take_network())
        if leave_early:
            # The last snapshot waits for the child to be gone: on a busy machine this thread may
            # come to kill it only after the sampler's last snapshot was due.
            take_last = sampler._take_last
            sampler._take_last = lambda: (gone.wait(30), take_last())
        sampler.begin()
        _wait_for_network_readings(sampler, 1)
        child.stdin.write("go\n")
        child.stdin.flush()
        received = 0
        while received < 100_000:
            received += len(peer.recv(65536))
        peer.sendall(b"y" * 7_777)
        assert child.stdout.readline().strip() == "done"
        exchanged.set()
        if leave_early:
            _wait_for_network_readings(sampler, 2)  # then leave, before the last snapshot
            child.kill()
            child.wait()
            gone.set()
        document = sampler.finish()
    finally:
        child.kill()
        child.wait()
        listener.close()
    return document["processes"]["client-0-0"]


def test_the_sampled_network_bytes_are_what_the_process_sent_and_received():
    """The reference is the payload the test itself exchanged with the child over TCP."""
    record = _exchange_with_child(2.9, leave_early=False)
    assert record["sent_bytes"] == 100_000
    assert record["received_bytes"] == 7_777
    assert record["cpu_s"] >= 0


def test_a_process_that_leaves_before_the_last_processor_snapshot_keeps_its_bytes():
    """A load generator that exits as the kept interval ends misses the last processor snapshot;
    the network snapshots, a quarter second inside the interval, still have it, and its
    processor time up to the last of them, scaled to the whole interval."""
    record = _exchange_with_child(2.0, leave_early=True)
    assert (record["sent_bytes"], record["received_bytes"]) == (100_000, 7_777)
    assert record["cpu_s"] >= 0
    start, inside = record["cpu_scaled_from_unix"]
    assert 0 < inside - start < 2.0


def test_a_gone_process_s_processor_time_is_scaled_from_the_inside_snapshot():
    from memrelay_lab.experiment._cpu import _Snapshot

    sampler = CpuSampler({"client-0-0": 1, "server-0": 2}, start=0.0, end=4.0)
    sampler._first = _Snapshot(100.0, {"client-0-0": 1.0, "server-0": 5.0}, {})
    sampler._inside = [_Snapshot(100.5, {"client-0-0": 1.2, "server-0": 5.1}, {}),
                       _Snapshot(103.5, {"client-0-0": 2.4, "server-0": 5.7}, {})]
    sampler._last = _Snapshot(104.0, {"server-0": 5.8}, {})  # the client left before the end
    processes = sampler.finish()["processes"]
    assert processes["server-0"]["cpu_s"] == pytest.approx(0.8) and "cpu_scaled_from_unix" not in processes["server-0"]
    # 1.4 s over the first 3.5 s: 1.6 s over the 4 s interval.
    assert processes["client-0-0"]["cpu_s"] == pytest.approx(1.6)
    assert processes["client-0-0"]["cpu_scaled_from_unix"] == [100.0, 103.5]
