"""The `memrelay-lab run` subcommand: run an experiment file.

    memrelay-lab run FILE [--out DIR] [--profile NAME] [--resume] [--dry-run] [--bin-dir DIR]

Exit status: 0 every run completed; 1 some runs failed (the summary lists them); 2 bad input
(a mistake in the file, a missing binary, a results folder that exists without --resume, a
host of [hosts] that cannot be used: unreachable, key refused, a program missing);
130 (143) stopped by Ctrl-C (SIGTERM), after stopping every process it started.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..experiment import (
    BinaryNotFound,
    HostError,
    Interrupted,
    ResultsExist,
    SpecError,
    TestbedUnavailable,
    default_out_dir,
    describe_parameters,
    find_binaries,
    load_experiment,
    plan,
    run_experiment,
)
from ._output import PROG

__all__ = ["add_run_parser", "run_command"]


def add_run_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `run` on the CLI's subparsers."""
    run = subparsers.add_parser(
        "run",
        help="run an experiment file (servers, middlewares, load generators) and keep every output",
        description="Run an experiment file: every configuration of its design, each repeated; raw outputs "
        "and manifest.json go to --out (default results/NAME, or results/NAME-PROFILE).",
        epilog="Keys of the experiment file (* may be a list):\n" + describe_parameters(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("file", type=Path, metavar="FILE", help="experiment file (TOML)")
    run.add_argument("--out", type=Path, metavar="DIR", help="results folder (default results/NAME[-PROFILE])")
    run.add_argument("--profile", metavar="NAME", help="apply the file's [profile.NAME] overrides, e.g. quick")
    run.add_argument("--resume", action="store_true", help="continue in an existing results folder, skipping "
                     "the runs it completed")
    run.add_argument("--dry-run", action="store_true", help="validate and list the runs, start nothing")
    run.add_argument("--bin-dir", type=Path, metavar="DIR", help="where memrelay and memrelay-bench are "
                     "(default $MEMRELAY_BIN_DIR, target/release, PATH)")
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    try:
        experiment = load_experiment(args.file, profile=args.profile)
        for warning in experiment.warnings:
            print(f"{PROG}: warning: {warning}", file=sys.stderr)
        runs = plan(experiment)
        if args.dry_run:
            seen = set()
            for run in runs:
                if run.configuration.index not in seen:
                    seen.add(run.configuration.index)
                    print(f"c{run.configuration.index:03d}  {run.configuration.label()}")
            load_s = sum(run.configuration.test_time for run in runs)
            if experiment.topology is not None:
                source = "the testbed" if experiment.topology.testbed else "[hosts], over SSH"
                placed = "; ".join(f"{role} on {', '.join(names)}" for role, names in experiment.topology.roles.items())
                print(f"hosts ({source}, checked when the run starts): {placed}")
            print(f"{len(seen)} configurations x {experiment.settings['repetitions']} repetitions = {len(runs)} runs "
                  f"of {experiment.settings['test_time']:g} s ({load_s / 60:.1f} min of load); results would go to "
                  f"{args.out or default_out_dir(experiment)}")
            return 0
        binaries = find_binaries(args.bin_dir)
        summary = run_experiment(experiment, args.out, resume=args.resume, binaries=binaries)
    except (SpecError, BinaryNotFound, ResultsExist, HostError, TestbedUnavailable) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except Interrupted as interrupted:
        return interrupted.exit_status
    except KeyboardInterrupt:  # Ctrl-C before anything was started
        return 130
    return 0 if summary.ok else 1
