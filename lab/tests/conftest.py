"""Fixtures shared by the tests, each a real experiment run once per test session (on first use):
`report_results`, used by test_report.py, test_model_builder.py and test_checks.py, and
`loaders_results`, used by test_synchronized_start.py and test_measured_columns.py.

`report_results`: a 2^2 2 design (clients 2 and 8 x multi-get size 1 and 4, sharded; two servers, two
middlewares with 4 workers, one request in ten logged with its timestamps), run once per
test session with the real memcached, memrelay and memrelay-bench (about 25 s). The
binaries are built with `cargo build --release` when target/release lacks them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memrelay_lab import parse_experiment, run_experiment
from memrelay_lab.experiment import REPO, BinaryNotFound, find_binaries

SPEC = """\
name = "report-test"
description = "report tests: a 2^2 2 design, clients x multi-get size"
servers = 2
client_machines = 1
instances_per_machine = 2
threads_per_instance = 1
clients_per_thread = [1, 4]
workload = "50-50"
multiget = [1, 4]
sharded = true
middlewares = 2
workers = 4
repetitions = 2
test_time = 2
keys = 1000
request_log_sample = 10
"""

def binaries():
    """The programs, building memrelay and memrelay-bench once if they are missing."""
    try:
        return find_binaries()
    except BinaryNotFound as missing:
        if "memcached" in str(missing).split(" not found")[0] or not shutil.which("cargo"):
            pytest.skip(f"needs the programs: {missing}")
    subprocess.run(
        ["cargo", "build", "--release", "-p", "memrelay", "-p", "memrelay-bench"],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return find_binaries()


@pytest.fixture(scope="session")
def report_results(tmp_path_factory) -> Path:
    """The results folder of the shared experiment (run once per session, on first use)."""
    programs = binaries()
    out = tmp_path_factory.mktemp("report-experiment") / "report-test"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(
            parse_experiment(SPEC, source="report-test.toml"),
            out,
            binaries=programs,
            progress=quiet,
            handle_signals=False,
        )
    assert summary.ok, f"the shared experiment failed: {summary.failures}"
    return out


LOADERS_SPEC = """\
name = "loaders"
description = "six load generators on three client machines, at three populations"
servers = 1
client_machines = 3
instances_per_machine = 2
threads_per_instance = 1
clients_per_thread = [1, 2, 4]
workload = "1:4"
middlewares = 1
workers = 2
repetitions = 1
test_time = 2
warmup = 0
cooldown = 0
keys = 500
value_size = 100
"""


@pytest.fixture(scope="session")
def loaders_results(tmp_path_factory) -> Path:
    """Three runs of six benches on loopback (three client machines of two instances; 6, 12 and
    24 clients), each bench started one after the other and told one start instant: the results
    folder of test_synchronized_start.py (every bench began at that instant) and of
    test_measured_columns.py (the load generators' own measures are no parameters)."""
    programs = binaries()
    out = tmp_path_factory.mktemp("loaders") / "results"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(parse_experiment(LOADERS_SPEC, source="loaders.toml"), out, binaries=programs,
                                 progress=quiet, handle_signals=False)
    assert summary.ok, f"the shared experiment failed: {summary.failures}"
    return out
