"""One instant at which every load generator of a run begins its load, on each host's own clock.

The lab starts the load generators one after the other, and starting one over SSH takes a
few tenths of a second on a loaded machine (six took 2.4 s once, issue 22). Had each begun its
load as it started, their kept intervals (warm-up and test time counted from each one's own
start) would lie seconds apart and the clients' summed throughput would add windows that do
not overlap. So the lab picks one instant on its own clock, far enough ahead for every start
(`start_margin`), and gives each bench that instant on its host's clock (``--start-at``): the
benches connect at once and wait for it.

A host's clock offset is the one `_environment` measured, host minus lab, so the instant on the
host's clock is the lab's plus the offset. memrelay-bench refuses an instant more than 60 s
ahead or more than 10 s past, so the margin stays well below a minute; a bench started late
(a busy machine) begins at once, and `loaders_overlap` in the results says how well the loads
still overlapped.
"""

from __future__ import annotations

__all__ = ["MAX_MARGIN_S", "on_host_clock", "start_margin"]

#: Time for the processes' own start-up (fork, exec, connecting), whatever the hosts.
BASE_MARGIN_S = 0.5
#: Time one start takes: a local fork and exec, or a command over an SSH channel (about 0.4 s
#: each on a loaded 2-core machine, issue 22).
LOCAL_START_S = 0.05
REMOTE_START_S = 0.5
#: memrelay-bench accepts at most 60 s ahead.
MAX_MARGIN_S = 30.0


def start_margin(local_starts: int, remote_starts: int) -> float:
    """Seconds from now until the load begins, for that many starts on this machine and over SSH."""
    if local_starts < 0 or remote_starts < 0:
        raise ValueError("a number of starts cannot be negative")
    return min(BASE_MARGIN_S + LOCAL_START_S * local_starts + REMOTE_START_S * remote_starts, MAX_MARGIN_S)


def on_host_clock(lab_time: float, clock_offset_s: float) -> float:
    """``lab_time`` (the lab's clock) as a host whose clock reads ``clock_offset_s`` more shows it."""
    return lab_time + clock_offset_s
