"""LocalHost: processes run in their own process group, their output goes to the log, and
stopping one stops everything it forked."""

import signal
import time
from pathlib import Path

from memrelay_lab import LocalHost


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def test_stop_ends_the_whole_process_group(tmp_path):
    host = LocalHost()
    handle = host.start("shell", ["sh", "-c", "echo started; sleep 30 & sleep 30"], tmp_path / "shell.log")
    deadline = time.monotonic() + 5
    while len(group_members(handle.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(group_members(handle.pid)) >= 2  # the shell and the sleeps it forked
    assert host.live == [handle]
    status = host.stop(handle, grace=2.0)
    assert status == -signal.SIGTERM
    assert group_members(handle.pid) == []
    assert host.live == []
    assert (tmp_path / "shell.log").read_text() == "started\n"


def test_stop_falls_back_to_sigkill(tmp_path):
    host = LocalHost()
    handle = host.start("stubborn", ["sh", "-c", "trap '' TERM; echo ready; sleep 30"], tmp_path / "s.log")
    while "ready" not in (tmp_path / "s.log").read_text():
        time.sleep(0.02)
    started = time.monotonic()
    assert host.stop(handle, grace=0.5) == -signal.SIGKILL
    # Killed, not waited out: far below the 30 s the process would sleep (a loose bound, so a busy
    # machine cannot fail it).
    assert time.monotonic() - started < 20
    assert group_members(handle.pid) == []


def test_stop_all_and_exit_status(tmp_path):
    host = LocalHost()
    quick = host.start("quick", ["sh", "-c", "exit 7"], tmp_path / "q.log")
    assert host.wait(quick, 5.0) == 7
    slow = [host.start(f"slow-{i}", ["sleep", "30"], tmp_path / f"{i}.log") for i in range(3)]
    stopped = host.stop_all(grace=2.0)
    assert sorted(h.pid for h in stopped) == sorted(h.pid for h in slow)
    assert all(h.stopped_by_us and h.returncode == -signal.SIGTERM for h in slow)
    assert not quick.stopped_by_us


def test_free_port_and_fetch(tmp_path):
    host = LocalHost()
    assert 1024 <= host.free_port() <= 65535
    source = tmp_path / "a.txt"
    source.write_text("x")
    assert host.fetch(source, tmp_path / "copy" / "b.txt").read_text() == "x"
    assert host.fetch(tmp_path / "missing", tmp_path / "c.txt") is None
