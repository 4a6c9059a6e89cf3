"""The experiment file: validation errors name the line and the reason; profiles and combinations
parse; and every shipped experiment file is valid in both its full and quick form."""

from pathlib import Path

import pytest

from memrelay_lab import SpecError, load_experiment, parse_experiment, plan

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

GOOD = """\
name = "t"
servers = 2
client_machines = 1
threads_per_instance = 2
clients_per_thread = [1, 4]
middlewares = 1
workers = 8
repetitions = 2
test_time = 4
warmup = 1
cooldown = 1

[profile.quick]
clients_per_thread = 2
repetitions = 1
"""


def error_of(text: str, **kwargs) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_experiment(text, source="x.toml", **kwargs)
    return caught.value


def line_of(text: str, fragment: str) -> int:
    """1-based line of the first line containing ``fragment`` (computed by the test, not the lab)."""
    return next(i for i, line in enumerate(text.splitlines(), start=1) if fragment in line)


def test_a_good_file_parses_with_defaults_filled_in():
    experiment = parse_experiment(GOOD, source="x.toml")
    assert experiment.name == "t"
    assert experiment.values["clients_per_thread"] == (1, 4)
    assert experiment.values["workload"] == ("read-only",)
    assert experiment.values["value_size"] == (1024,)
    assert experiment.settings["repetitions"] == 2
    assert experiment.settings["warmup"] == 1.0
    assert experiment.swept == ["clients_per_thread"]


def test_profile_overrides_values():
    experiment = parse_experiment(GOOD, source="x.toml", profile="quick")
    assert experiment.values["clients_per_thread"] == (2,)
    assert experiment.settings["repetitions"] == 1
    assert experiment.settings["test_time"] == 4.0


def test_unknown_profile_is_refused_with_the_known_ones():
    error = error_of(GOOD, profile="slow")
    assert "no profile 'slow'" in str(error) and "quick" in str(error)


def test_unknown_key_gives_its_line_and_a_suggestion():
    text = GOOD.replace("workers = 8", "wokers = 8")
    error = error_of(text)
    assert error.line == line_of(text, "wokers")
    assert error.key == "wokers"
    assert "unknown key" in error.reason and "'workers'" in error.reason
    assert str(error).startswith(f"x.toml:{error.line}: wokers: ")


def test_unknown_key_in_a_profile_table_points_into_the_profile():
    text = GOOD + "servrs = 3\n"
    error = error_of(text)
    assert error.line == len(text.splitlines())
    assert "did you mean 'servers'" in error.reason


def test_bad_value_gives_its_line():
    text = GOOD.replace("servers = 2", "servers = 0")
    error = error_of(text)
    assert (error.line, error.key) == (line_of(text, "servers = 0"), "servers")
    assert "at least 1" in error.reason


@pytest.mark.parametrize(
    "old, new, key, words",
    [
        ("workers = 8", 'workers = "eight"', "workers", "whole number"),
        ("workers = 8", "workers = 8.5", "workers", "whole number"),
        ("workers = 8", "workers = true", "workers", "whole number"),
        ("middlewares = 1", 'middlewares = 1\nworkload = "writes"', "workload", "write-only, read-only"),
        ("middlewares = 1", 'middlewares = 1\nworkload = "0:0"', "workload", "sends nothing"),
        ("middlewares = 1", 'middlewares = 1\nengine = "threads"', "engine", "'pool', 'evented'"),
        ("middlewares = 1", "middlewares = 1\nsharded = 1", "sharded", "true or false"),
        ("middlewares = 1", 'middlewares = 1\nreplication = "most"', "replication", "half"),
        ("clients_per_thread = [1, 4]", "clients_per_thread = []", "clients_per_thread", "empty list"),
        ("clients_per_thread = [1, 4]", "clients_per_thread = [1, 1]", "clients_per_thread", "listed twice"),
        ("clients_per_thread = [1, 4]", "clients_per_thread = [[1], 4]", "clients_per_thread", "inside a list"),
        ("test_time = 4", "test_time = 0", "test_time", "more than zero"),
        ("warmup = 1", "warmup = 3", "warmup", "leaves no whole 1 s measurement window"),
    ],
)
def test_bad_values(old, new, key, words):
    text = GOOD.replace(old, new)
    error = error_of(text)
    assert error.key == key
    assert words in error.reason, error.reason
    assert error.line == line_of(text, new.splitlines()[-1].split("=")[0].strip() + " =")


@pytest.mark.parametrize("key, value", [("repetitions", "[2, 3]"), ("test_time", "[4, 8]"), ("warmup", "[1]")])
def test_a_list_where_one_value_is_needed(key, value):
    text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line for line in GOOD.splitlines())
    error = error_of(text)
    assert (error.key, error.line) == (key, line_of(text, f"{key} = {value}"))
    assert "takes one value, not a list" in error.reason


def test_missing_required_key():
    error = error_of(GOOD.replace("servers = 2\n", ""))
    assert error.key == "servers" and "missing" in error.reason


def test_toml_syntax_error_keeps_the_line():
    text = GOOD.replace("workers = 8", "workers == 8")
    error = error_of(text)
    assert error.line == line_of(text, "workers ==")
    assert "not valid TOML" in error.reason


def test_toml_syntax_error_names_line_and_column():
    text = GOOD.replace("workers = 8", "workers == 8")
    line = line_of(text, "workers ==")
    column = text.splitlines()[line - 1].index("==") + 2  # 1-based column of the second "="
    assert str(error_of(text)) == f"x.toml:{line}:{column}: not valid TOML: Invalid value"


def test_a_measured_span_without_a_whole_window_is_an_error():
    text = GOOD.replace("test_time = 4", "test_time = 2.5")
    assert str(error_of(text)) == (
        f"x.toml:{line_of(text, 'warmup =')}: warmup: test_time (2.5 s) - warmup (1 s) - cooldown (1 s) leaves "
        "no whole 1 s measurement window (windows start on whole seconds of the load)"
    )
    assert parse_experiment(GOOD.replace("test_time = 4", "test_time = 3"), source="x.toml").warnings == ()


def warnings_of(text: str, **kwargs) -> list[str]:
    return [str(w) for w in parse_experiment(text, source="x.toml", **kwargs).warnings]


def test_a_good_file_has_no_warnings():
    assert warnings_of(GOOD) == []


@pytest.mark.parametrize(
    "old, new, key, reason",
    [
        ("middlewares = 1", 'middlewares = 1\nengine = "evented"', "workers",
         'ignored: engine = "evented" everywhere, and only the pool engine has workers'),
        ("middlewares = 1", "middlewares = 0", "workers",
         "ignored: middlewares = 0 everywhere (the clients talk to the servers directly)"),
        ("middlewares = 1", "middlewares = 1\nsharded = true", "sharded",
         "ignored: multiget = 1 everywhere, and sharded only splits multi-gets"),
        ("middlewares = 1", 'middlewares = 1\nread_from = "any-replica"', "read_from",
         'ignored: distribution = "all" everywhere; read_from needs distribution = "ketama"'),
        ("repetitions = 2", "repetitions = 1", "repetitions",
         "repetitions = 1 gives no confidence intervals (at least 2 are needed)"),
    ],
)
def test_ignored_and_weakening_keys_are_named_with_their_line(old, new, key, reason):
    text = GOOD.replace(old, new)
    assert warnings_of(text) == [f"x.toml:{line_of(text, key + ' =')}: {key}: {reason}"]


def test_keys_that_matter_somewhere_in_the_design_are_not_warned_about():
    assert warnings_of(GOOD.replace("middlewares = 1", "middlewares = [0, 1]")) == []
    assert warnings_of(GOOD.replace("middlewares = 1", 'middlewares = 1\nengine = ["pool", "evented"]')) == []
    assert warnings_of(GOOD.replace("middlewares = 1", "middlewares = 1\nsharded = true\nmultiget = [1, 4]")) == []
    text = GOOD.replace("middlewares = 1", 'middlewares = 1\ndistribution = "ketama"\nread_from = "any-replica"')
    assert warnings_of(text) == []


def test_the_profile_in_use_decides_the_warnings():
    line = line_of(GOOD, "repetitions = 1")  # in [profile.quick]
    assert warnings_of(GOOD, profile="quick") == [
        f"x.toml:{line}: repetitions: repetitions = 1 gives no confidence intervals (at least 2 are needed)"
    ]


def test_errors_inside_inline_combinations_point_at_the_right_block():
    text = GOOD + """\

[profile.other]
combinations = [
  { servers = 1, workers = 8 },
  { servers = 3, wrkers = 32 },
]
"""
    error = error_of(text)
    assert error.key == "wrkers" and error.line == line_of(text, "wrkers")
    assert "combination 2" in error.reason

    text = GOOD.replace("[profile.quick]", 'combinations = [ { servers = 1 }, { servers = "two" } ]\n\n[profile.quick]')
    error = error_of(text)
    assert error.key == "servers" and error.line == line_of(text, "combinations =")
    assert "combination 2" in error.reason and "whole number" in error.reason


def test_errors_inside_array_of_tables_combinations():
    text = GOOD.replace("[profile.quick]", "[[combinations]]\nservers = 1\n\n[[combinations]]\nservers = 2\nengine = 5\n\n"
                        "[profile.quick]")
    error = error_of(text)
    assert error.key == "engine" and error.line == line_of(text, "engine = 5")


def test_cross_key_rules_are_checked_before_anything_runs():
    text = GOOD.replace("workers = 8", 'workers = 8\nreplication = "half"')
    error = error_of_plan(text)
    assert error.key == "replication" and "ketama" in error.reason
    assert error.line == line_of(text, "replication =")

    text = GOOD.replace("workers = 8", 'workers = 8\ndistribution = "ketama"\nreplication = 3')
    error = error_of_plan(text)
    assert error.key == "replication" and "at least 3 servers" in error.reason

    text = GOOD.replace("middlewares = 1", "middlewares = 2")
    error = error_of_plan(text)
    assert error.key == "middlewares" and "at least one" in error.reason
    assert error.line == line_of(text, "middlewares = 2")


def error_of_plan(text: str) -> SpecError:
    experiment = parse_experiment(text, source="x.toml")
    with pytest.raises(SpecError) as caught:
        plan(experiment)
    return caught.value


def test_missing_file():
    with pytest.raises(SpecError, match="no such file"):
        load_experiment("/nonexistent/experiment.toml")


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_experiments_are_valid(path):
    full = load_experiment(path)
    assert plan(full), path
    if "quick" in full.profiles:
        quick = load_experiment(path, profile="quick")
        runs = plan(quick)
        # "fits this 2-core machine in a few minutes": at most ~5 minutes of load.
        assert sum(run.configuration.test_time for run in runs) <= 300, path
        # Same shape: the quick profile varies the same keys as the full design.
        assert set(quick.swept) <= set(full.swept), path


def test_run_prints_the_warnings(tmp_path, capsys):
    from memrelay_lab.cli import main

    path = tmp_path / "x.toml"
    path.write_text(GOOD.replace("repetitions = 2", "repetitions = 1"))
    assert main(["run", str(path), "--dry-run"]) == 0
    line = line_of(path.read_text(), "repetitions = 1")
    assert capsys.readouterr().err == (
        f"memrelay-lab: warning: {path}:{line}: repetitions: repetitions = 1 gives no confidence intervals "
        "(at least 2 are needed)\n"
    )


def test_an_unknown_protocol_is_refused_with_the_choices():
    text = str(error_of('protocol = "binary"\n' + GOOD))
    assert "protocol" in text and "text" in text and "meta" in text
