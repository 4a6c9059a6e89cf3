"""free_port's range: below the kernel's ephemeral ports, or $MEMRELAY_PORTS (make test gives the
lab and the bench, which run side by side, ranges of their own)."""

import pytest

from memrelay_lab.plumbing import processes


def test_the_default_range_is_below_the_ephemeral_ports():
    assert processes._port_range(None) == (20000, 32768)
    assert processes._port_range("") == (20000, 32768)


def test_a_range_given_is_taken_with_both_ends():
    assert processes._port_range("26384-32767") == (26384, 32768)


@pytest.mark.parametrize("spec", ["20000", "a-b", "30000-20000", "80-90", "20000-70000"])
def test_a_bad_range_says_what_is_expected(spec):
    with pytest.raises(ValueError, match="MEMRELAY_PORTS"):
        processes._port_range(spec)


def test_free_port_picks_within_the_range(monkeypatch):
    monkeypatch.setattr(processes, "PORTS_FROM", 26384)
    monkeypatch.setattr(processes, "PORTS_TO", 26390)
    assert all(26384 <= processes.free_port() < 26390 for _ in range(20))
