"""An experiment from its TOML file to its raw results folder: the spec, its expansion into
configurations and runs, the processes of one run, the hosts they run on (this machine, or machines over SSH), and the runner."""

from ._cpu import CpuSampler, machine_cores, thread_role
from ._expand import Configuration, Instance, Run, expand, placement, plan
from ._hosts import Host, HostError, LocalHost, ProcessHandle
from ._ssh import SSHHost
from ._topology import HostSpec, TestbedUnavailable, Topology
from ._binaries import REPO, Binaries, BinaryNotFound, find_binaries
from ._runner import ExperimentSummary, Interrupted, ResultsExist, default_out_dir, run_experiment
from ._spec import (
    PARAMETERS,
    SETTINGS,
    WORKLOADS,
    Experiment,
    SpecError,
    SpecWarning,
    describe_parameters,
    load_experiment,
    parse_experiment,
    workload_ratio,
)

__all__ = [
    "workload_ratio",
    "PARAMETERS",
    "REPO",
    "SETTINGS",
    "WORKLOADS",
    "Binaries",
    "BinaryNotFound",
    "Configuration",
    "CpuSampler",
    "Experiment",
    "ExperimentSummary",
    "Host",
    "HostError",
    "HostSpec",
    "Instance",
    "Interrupted",
    "LocalHost",
    "ProcessHandle",
    "ResultsExist",
    "Run",
    "SSHHost",
    "SpecError",
    "SpecWarning",
    "TestbedUnavailable",
    "Topology",
    "default_out_dir",
    "describe_parameters",
    "expand",
    "find_binaries",
    "load_experiment",
    "machine_cores",
    "parse_experiment",
    "placement",
    "plan",
    "run_experiment",
    "thread_role",
]
