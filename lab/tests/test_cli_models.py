"""`memrelay-lab model ...` and `memrelay-lab factorial ...`: JSON on stdout checked
against seed tables and hand computations; bad input gives one line on stderr, exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memrelay_lab.cli import main

# Hand-computed in test_mva.py: Z = 2, queues D = 1 and D = 2 -> X(3) = 45/109.
HAND_NETWORK = {
    "think_time": 2.0,
    "population": 3,
    "centers": [
        {"name": "cpu", "kind": "queue", "demand": 1.0},
        {"name": "disk", "kind": "queue", "service_time": 0.5, "visits": 4},
    ],
}

SEED_002_CSV = """servers,writes,tps
3,1%,13584
3,1%,13140
3,1%,13560
7,1%,11860
7,1%,11644
7,1%,12160
3,10%,12742
3,10%,12622
3,10%,12070
7,10%,10986
7,10%,11296
7,10%,11024
"""


def run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_mm1_reproduces_seed_000_table_24(capsys):
    # Table 24, VC = 10: lambda = 14486, mu = 32 x 592.38385 = 18956.28 ops/s.
    status, out, err = run(capsys, "model", "mm1", "--arrival-rate", "14486", "--service-rate", "18956.2832")
    assert status == 0 and err == ""
    record = json.loads(out)
    assert record["traffic_intensity"] == pytest.approx(0.76419, abs=1e-4)
    assert record["mean_response_time"] * 1e3 == pytest.approx(0.22371, rel=1e-3)
    assert record["response_time_percentiles"]["90"] * 1e3 == pytest.approx(0.51511, rel=1e-3)
    assert record["waiting_time_percentiles"]["99"] * 1e3 == pytest.approx(0.97006, rel=1e-3)
    assert record["prob_at_least_jobs"]["5"] == pytest.approx(0.26062, rel=1e-3)


def test_mmm_reproduces_seed_000_table_29(capsys):
    # Table 29, VC = 16: lambda = 16838, mu = 592.38385 per worker, m = 32.
    status, out, _ = run(
        capsys, "model", "mmm", "--arrival-rate", "16838", "--service-rate", "592.38385", "--servers", "32",
        "--percentiles", "90,99",
    )  # fmt: skip
    assert status == 0
    record = json.loads(out)
    assert record["prob_queueing"] == pytest.approx(0.41161, rel=2e-3)
    assert record["mean_jobs_in_system"] == pytest.approx(31.69628, rel=1e-3)
    assert record["mean_waiting_time"] * 1e3 == pytest.approx(0.19432, rel=2e-3)
    assert record["waiting_time_percentiles"]["90"] * 1e3 == pytest.approx(0.66798, rel=2e-3)
    assert set(record["response_time_percentiles"]) == {"90", "99"}


def test_table_format_is_for_humans(capsys):
    status, out, _ = run(capsys, "model", "mm1", "--arrival-rate", "1", "--service-rate", "2", "--format", "table")
    assert status == 0
    assert "traffic_intensity" in out and "0.5" in out
    assert not out.lstrip().startswith("{")


def test_unstable_system_is_one_line_and_exit_2(capsys):
    status, out, err = run(capsys, "model", "mmm", "--arrival-rate", "900", "--service-rate", "100", "--servers", "8")
    assert status == 2 and out == ""
    assert err.startswith("memrelay-lab: error: ") and "rho" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_mva_file_matches_hand_computation(capsys, tmp_path, suffix):
    path = tmp_path / f"network{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(HAND_NETWORK))
    else:
        path.write_text(
            "think_time = 2.0\npopulation = 3\n"
            '[[centers]]\nname = "cpu"\nkind = "queue"\ndemand = 1.0\n'
            '[[centers]]\nname = "disk"\nkind = "queue"\nservice_time = 0.5\nvisits = 4\n'
        )
    status, out, err = run(capsys, "model", "mva", str(path))
    assert status == 0, err
    record = json.loads(out)
    assert [row["throughput"] for row in record["results"]] == pytest.approx([1 / 5, 1 / 3, 45 / 109])
    assert record["results"][2]["centers"]["disk"]["queue_length"] == pytest.approx(174 / 109)
    # D = 3, Z = 2, D_max = 2 (disk): N* = 5/2.
    assert record["bounds"]["bottleneck"] == "disk"
    assert record["bounds"]["knee_population"] == pytest.approx(2.5)


def test_mva_with_worker_pool_reports_its_marginals(capsys, tmp_path):
    path = tmp_path / "pool.json"
    # Hand-computed in test_mva.py: Z = 1, 2 workers with D = 2 -> P(j | 3) = (1, 6, 12, 12)/31.
    workers = {"name": "workers", "kind": "multi", "demand": 2, "servers": 2}
    path.write_text(json.dumps({"think_time": 1, "population": 3, "centers": [workers]}))
    status, out, _ = run(capsys, "model", "mva", str(path))
    assert status == 0
    record = json.loads(out)
    assert record["marginal_probabilities"]["workers"] == pytest.approx([1 / 31, 6 / 31, 12 / 31, 12 / 31])
    status, out, _ = run(capsys, "model", "mva", str(path), "--format", "table")
    assert status == 0 and "workers" in out and "bottleneck workers" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "Expecting property name"),
        (json.dumps({"population": 3, "centers": []}), "centers"),
        (json.dumps({"population": 0, "centers": [{"kind": "queue", "demand": 1}]}), "population"),
        (json.dumps({"population": 2, "centers": [{"kind": "disk", "demand": 1}]}), "kind"),
        (json.dumps({"population": 2, "centers": [{"kind": "multi", "demand": 1}]}), "servers"),
        (json.dumps({"population": 2, "centers": [{"kind": "queue"}]}), "demand"),
        (json.dumps({"population": 2, "centers": [{"kind": "queue", "demand": -1}]}), "demand"),
    ],
)
def test_malformed_model_files(capsys, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    status, out, err = run(capsys, "model", "mva", str(path))
    assert status == 2 and out == ""
    assert err.startswith("memrelay-lab: error: ") and message in err and err.count("\n") == 1


def test_missing_file(capsys, tmp_path):
    status, _, err = run(capsys, "model", "mva", str(tmp_path / "nope.json"))
    assert status == 2
    assert err == f"memrelay-lab: error: no such file: {tmp_path / 'nope.json'}\n"
    status, _, err = run(capsys, "factorial", str(tmp_path / "nope.csv"), "--response", "y", "--factors", "A")
    assert status == 2 and err.startswith("memrelay-lab: error: no such file")


def test_factorial_csv_reproduces_seed_002(capsys, tmp_path):
    path = tmp_path / "writes.csv"
    path.write_text(SEED_002_CSV)
    status, out, err = run(capsys, "factorial", str(path), "--response", "tps", "--factors", "servers,writes")
    assert status == 0, err
    record = json.loads(out)
    effects = record["effects"]
    assert effects["I"]["q"] == 12224 and effects["servers"]["q"] == -729
    assert effects["writes"]["q"] == -434 and effects["servers:writes"]["q"] == 41
    assert effects["servers"]["variation_percent"] == pytest.approx(69.09, abs=0.005)
    assert record["sse"] == pytest.approx(573_080)
    assert record["levels"]["writes"] == {"low": "1%", "high": "10%"}
    assert effects["servers:writes"]["significant"] is False


def test_factorial_log_level_and_table(capsys, tmp_path):
    path = tmp_path / "writes.csv"
    path.write_text(SEED_002_CSV)
    status, out, _ = run(
        capsys, "factorial", str(path), "--response", "tps", "--factors", "servers,writes", "--log", "--level", "0.9"
    )
    assert status == 0
    record = json.loads(out)
    assert record["model"] == "multiplicative" and record["confidence_level"] == 0.9
    assert "multiplicative_effect" in record["effects"]["servers"]
    status, out, _ = run(capsys, "factorial", str(path), "--response", "tps", "--factors", "servers,writes",
                         "--format", "table")  # fmt: skip
    assert status == 0 and "Errors" in out and "y_mean" in out


@pytest.mark.parametrize(
    ("content", "factors", "message"),
    [
        ("servers,tps\n3,100\n7,fast\n", "servers", "non-numeric"),
        ("servers,tps\n3,100\n7,100\n", "workers", "missing column"),
        ("servers,tps\n3,100\n7,100\n9,100\n", "servers", "two levels"),
        ("", "servers", "cannot read"),
    ],
)
def test_malformed_csv(capsys, tmp_path, content, factors, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    status, out, err = run(capsys, "factorial", str(path), "--response", "tps", "--factors", factors)
    assert status == 2 and out == ""
    assert err.startswith("memrelay-lab: error: ") and message in err and err.count("\n") == 1


def test_usage_errors_exit_2(capsys):
    assert main(["model", "mm1", "--arrival-rate", "1"]) == 2
    assert "required" in capsys.readouterr().err
    assert main([]) == 2


def test_console_script_runs_as_a_subprocess():
    script = Path(sys.executable).with_name("memrelay-lab")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "memrelay_lab.cli"]
    completed = subprocess.run(
        [*command, "model", "mm1", "--arrival-rate", "50", "--service-rate", "100"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    # M/M/1 with rho = 1/2: E[n] = 1, E[r] = (1/100) / (1/2) = 0.02 s.
    record = json.loads(completed.stdout)
    assert record["mean_jobs_in_system"] == pytest.approx(1.0)
    assert record["mean_response_time"] == pytest.approx(0.02)
