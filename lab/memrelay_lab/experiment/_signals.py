"""Stopping an experiment cleanly on SIGINT/SIGTERM.

The first signal raises `Interrupted` in the main thread; the ones after it are ignored
while the runner stops everything it started, so one Ctrl-C is enough and the cleanup
cannot be cut short.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Interrupted", "SignalGuard", "nothing"]


class Interrupted(BaseException):
    """The experiment was stopped by a signal; everything it started has been stopped."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class SignalGuard:
    """Turns the first SIGINT/SIGTERM into Interrupted; ignores the ones during cleanup."""

    def __init__(self) -> None:
        self.stopping = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.stopping:
            return
        self.stopping = True
        raise Interrupted(signum)

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self._handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@contextmanager
def nothing() -> Iterator[None]:
    yield
