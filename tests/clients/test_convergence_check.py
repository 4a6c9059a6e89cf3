"""The convergence check itself, on made-up replicas: it passes a converged state and fails
doctored ones (an acknowledged write lost, replicas that differ, a resurrected delete)."""

from convergence import problems

ATTEMPTED = {"a": ["a#0", "a#4", "", "a#12"], "b": ["b#1", ""], "c": ["c#2"]}
ACKED = {"a": 2, "b": 1, "c": 0}  # a: the delete (index 2) acknowledged, a#12 failed


def test_converged_replicas_pass():
    same = {"a": "a#12", "c": "c#2"}  # a#12 failed for the client but reached the replicas
    assert problems(ATTEMPTED, ACKED, [same, dict(same), dict(same)]) == []
    gone = {"c": "c#2"}
    assert problems(ATTEMPTED, ACKED, [gone, dict(gone), dict(gone)]) == []


def test_lost_acknowledged_write_fails():
    lost = {"a": "a#12"}  # c#2 was acknowledged, then lost everywhere
    assert problems(ATTEMPTED, ACKED, [lost, dict(lost), dict(lost)]) == [
        "c: acknowledged 'c#2' lost, replicas hold '(nothing)'"
    ]


def test_resurrected_delete_fails():
    old = {"a": "a#4", "c": "c#2"}  # the acknowledged delete of a undone by a replayed older set
    assert problems(ATTEMPTED, ACKED, [old, dict(old), dict(old)]) == [
        "a: acknowledged '(deleted)' lost, replicas hold 'a#4'"
    ]


def test_diverged_replicas_fail():
    good = {"a": "a#12", "c": "c#2"}
    assert problems(ATTEMPTED, ACKED, [good, {"c": "c#2"}, dict(good)]) == [
        "a: replicas differ: ['a#12', '', 'a#12']"
    ]
