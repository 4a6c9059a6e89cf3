"""The interactive response-time law against seed 002 Table 5 and seed 000 Table 6."""

import json

import pandas as pd
import pytest

from memrelay_lab import (
    InteractiveLawCheck,
    estimate_think_time,
    interactive_law,
    interactive_law_frame,
    think_time_from_law,
)

# Seed 002 Table 5: N = 360 clients; R and Z in ms, X in ops/s.
SEED_002_TABLE_5 = pd.DataFrame(
    [
        (3, 1, 26.2615, 13428.5833333, 0.546986871975),
        (3, 5, 26.942, 13088.7, 0.562641408238),
        (3, 10, 27.717, 12478.6666667, 1.13223602941),
        (5, 1, 28.261, 12424.55, 0.713892450833),
        (5, 5, 28.393, 12313.47, 0.843275395969),
        (5, 10, 29.9635, 11615.2633333, 1.0302011043),
        (7, 1, 29.217, 11888.1533333, 1.06524736903),
        (7, 5, 30.5355, 11471.2633333, 0.847268361263),
        (7, 10, 31.5005, 11102.3533333, 0.925057824775),
    ],
    columns=["servers", "write_percent", "response_time", "throughput", "think_time"],
).assign(clients=360)

# Seed 000 Table 6: 6 clients per virtual client (3 machines x 2 instances x 1 thread),
# R measured on the middleware, X measured, and X "derived from MW resp. time" = N / R.
SEED_000_TABLE_6 = [
    # (VC, measured X, derived X, R on the middleware in ms)
    (4, 6854, 8962, 2.68),
    (10, 13771, 17165, 3.50),
    (16, 16838, 20113, 4.77),
    (32, 24182, 28521, 6.73),
]


@pytest.mark.parametrize(
    "row", list(SEED_002_TABLE_5.itertuples(index=False)), ids=lambda r: f"{r.servers}s-{r.write_percent}%"
)
def test_think_time_solved_from_the_law_matches_seed_002_table_5(row):
    z = think_time_from_law(row.clients, row.throughput, row.response_time, time_unit="ms")
    assert z == pytest.approx(row.think_time, abs=1e-6)
    check = interactive_law(row.clients, row.throughput, row.response_time, row.think_time, time_unit="ms")
    assert check.predicted_response_time == pytest.approx(row.response_time, rel=1e-8)
    assert check.predicted_throughput == pytest.approx(row.throughput, rel=1e-8)
    assert check.consistent


@pytest.mark.parametrize(("vc", "measured", "derived", "response_ms"), SEED_000_TABLE_6)
def test_seed_000_table_6_derived_throughput_and_the_flag(vc, measured, derived, response_ms):
    check = interactive_law(6 * vc, measured, response_ms, 0.0, time_unit="ms")
    # The table's R is printed with 2 decimals, hence 0.5 %.
    assert check.predicted_throughput == pytest.approx(derived, rel=5e-3)
    # Middleware-side R leaves out the client <-> middleware latency: 17-31 % off, flagged.
    assert not check.consistent
    assert check.throughput_deviation == pytest.approx(derived / measured - 1, abs=0.01)


def test_think_time_estimated_from_client_and_middleware_response_times():
    # Client sees 3.0 ms, middleware 2.5 ms: the 0.5 ms round trip is the middleware's Z.
    z = estimate_think_time(3.0, 2.5)
    assert z == pytest.approx(0.5)
    check = interactive_law(24, 8000.0, 2.5, z, time_unit="ms")
    assert check.predicted_throughput == pytest.approx(24 / 3.0e-3)
    assert check.predicted_response_time == pytest.approx(24 / 8000 * 1e3 - 0.5)
    assert check.consistent


def test_deviations_and_tolerance():
    # N = 100, X = 1000/s, R = 0.08 s, Z = 0: predicted R = 0.1 s (+25 %), X = 1250/s (+25 %).
    check = interactive_law(100, 1000.0, 0.08)
    assert check.response_time_deviation == pytest.approx(0.25)
    assert check.throughput_deviation == pytest.approx(0.25)
    assert not check.consistent
    assert interactive_law(100, 1000.0, 0.08, tolerance=0.3).consistent
    assert isinstance(check, InteractiveLawCheck)
    assert json.loads(json.dumps(check.to_dict()))["consistent"] is False


def test_frame_with_think_time_column_and_constant():
    table = interactive_law_frame(SEED_002_TABLE_5, think_time="think_time", time_unit="ms")
    assert table["consistent"].all()
    assert table["response_time_deviation"].abs().max() < 1e-8
    # Without think time, R is 2-4 % short of N/X: fine at 10 %, flagged at 1 %.
    assert interactive_law_frame(SEED_002_TABLE_5, time_unit="ms")["consistent"].all()
    strict = interactive_law_frame(SEED_002_TABLE_5, time_unit="ms", tolerance=0.01)
    assert not strict["consistent"].any()
    assert list(strict.columns[: len(SEED_002_TABLE_5.columns)]) == list(SEED_002_TABLE_5.columns)


def test_frame_with_client_side_response_time():
    frame = pd.DataFrame({"clients": [24, 60], "throughput": [8000.0, 16000.0], "response_time": [2.5, 3.2],
                          "client_rt": [3.0, 3.75]})  # fmt: skip
    table = interactive_law_frame(frame, client_response_time="client_rt", time_unit="ms")
    assert table["think_time"].tolist() == pytest.approx([0.5, 0.55])
    assert table["predicted_throughput"].tolist() == pytest.approx([8000.0, 16000.0])
    assert table["consistent"].all()


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="time_unit"):
        interactive_law(1, 1.0, 1.0, time_unit="min")
    with pytest.raises(ValueError, match="throughput"):
        interactive_law(1, 0.0, 1.0)
    with pytest.raises(ValueError, match="missing columns"):
        interactive_law_frame(pd.DataFrame({"clients": [1]}))


def test_report_table_shows_seed_002_table_5_think_time():
    # Seed 002 Table 5 through the report's table: N, X and R (on the clients) of every
    # configuration give the seed's Z = N/X - R, printed beside the law's check.
    from types import SimpleNamespace

    from memrelay_lab.analysis import interactive_law_table

    table = SEED_002_TABLE_5.rename(columns={"response_time": "response_ms"}).assign(
        configuration=range(len(SEED_002_TABLE_5)))
    summary = SimpleNamespace(pooled_table=lambda: table.copy(), display_columns=["servers", "write_percent"])
    frame = interactive_law_table(summary)
    assert frame["think_time_law"].tolist() == pytest.approx(SEED_002_TABLE_5["think_time"].tolist(), abs=1e-6)
    # The check can fail: a doctored X moves Z away from the seed's.
    doctored = table.assign(throughput=table["throughput"] * 1.01)
    summary = SimpleNamespace(pooled_table=lambda: doctored.copy(), display_columns=["servers", "write_percent"])
    moved = interactive_law_table(summary)["think_time_law"]
    assert (moved - SEED_002_TABLE_5["think_time"]).abs().min() > 0.1
