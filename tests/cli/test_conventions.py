"""Every command follows the same conventions, checked on the click command tree itself (not on --help text).

- Listing and status commands take ``--json``; a ``--format`` with a json choice brings ``--json`` along.
- A run is named one way: a RUN argument of the shared ``RunRef`` type, beside the shared ``--store``.
- An option that options.py declares is never declared again by a command (the ``SharedOption`` class tells).
- ``-o`` is the shared output FILE everywhere.
- Nothing is hidden: no old spelling of a command or an option is kept (there are no 0.1.0 users to protect).
- The sweep's flags are the typed experiment overrides, one for one, and their defaults are the model's.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from orchestrator.cli import cli
from orchestrator.commands.options import RunRef, SharedOption
from tests.cli.conftest import Headroom

#: The commands that list things or report state: each must print JSON on --json.
LISTINGS = {
    "runs list",
    "tasks list",
    "tasks validate",
    "tasks show",
    "cluster status",
    "runs verify",
    "tasks import",
    "results import",
    "tasks provenance",
    "runs compare",
    "runs regrade",
    "report",
}
#: Options every command must take from options.py wherever it has them (the audit's list, and the rest shared).
SHARED = {
    "--store",
    "--json",
    "--format",
    "--namespace",
    "--kubeconfig",
    "--kube-context",
    "--enforcement",
    "--rules",
    "--attempts",
    "--concurrency",
    "--seed",
    "--output",
    "--out-dir",
    "--backend",
    "--no-canary",
    "--agent-timeout",
    "--keep-pods",
}


def walk(group: click.Group = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    """Every command in the tree, hidden ones included, by its full path."""
    with click.Context(group) as ctx:
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert cmd is not None
            yield " ".join((*path, name)), cmd
            if isinstance(cmd, click.Group):
                yield from walk(cmd, (*path, name))


COMMANDS = dict(walk())
LEAVES = {name: cmd for name, cmd in COMMANDS.items() if not isinstance(cmd, click.Group)}


def options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option)]


def flags(cmd: click.Command) -> set[str]:
    return {o for p in options(cmd) for o in p.opts}


def test_the_tree_is_the_documented_one() -> None:
    visible = {name for name, cmd in COMMANDS.items() if not cmd.hidden and " " not in name}
    assert visible == {"sweep", "resume", "demo", "report", "view", "schema", "runs", "tasks", "results", "cluster"}
    assert LISTINGS <= set(LEAVES)


@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_listing_and_status_commands_take_json(name: str) -> None:
    json_options = [p for p in options(LEAVES[name]) if "--json" in p.opts]
    assert len(json_options) == 1 and isinstance(json_options[0], SharedOption), name


def test_a_json_format_brings_json_along() -> None:
    for name, cmd in LEAVES.items():
        for p in options(cmd):
            if "--format" in p.opts and isinstance(p.type, click.Choice) and "json" in p.type.choices:
                assert "--json" in flags(cmd), name


def test_runs_are_named_one_way() -> None:
    named = []
    for name, cmd in LEAVES.items():
        for p in cmd.params:
            if isinstance(p, click.Argument) and "run" in (p.name or ""):
                assert isinstance(p.type, RunRef), f"{name}: {p.name} is not a RUN"
                assert "--store" in flags(cmd), f"{name}: RUN without --store to look it up in"
                named.append(name)
            if isinstance(p, click.Option):
                assert not {"--run-id", "--run"} & set(p.opts), f"{name}: {p.opts} names a run some other way than RUN"
    assert {"report", "resume", "runs compare", "runs calibrate", "runs regrade", "runs bundle", "runs cleanup"} <= set(
        named
    )


def test_shared_options_are_declared_once() -> None:
    shared_spellings = {
        o for cmd in LEAVES.values() for p in options(cmd) if isinstance(p, SharedOption) for o in p.opts
    }
    assert SHARED <= shared_spellings
    for name, cmd in LEAVES.items():
        for p in options(cmd):
            if not isinstance(p, SharedOption):
                assert not set(p.opts) & shared_spellings, f"{name} declares its own {p.opts}: use options.py"


def test_every_dash_o_is_an_output_file() -> None:
    seen = []
    for name, cmd in LEAVES.items():
        for p in options(cmd):
            if "-o" not in p.opts:
                continue
            seen.append(name)
            assert isinstance(p, SharedOption) and p.name == "output" and isinstance(p.type, click.Path), name
            assert "file" in (p.help or "") and "director" not in (p.help or ""), f"{name}: {p.help}"
    assert {"report", "runs bundle", "tasks audit", "tasks judge calibrate"} <= set(seen)


def test_nothing_is_hidden() -> None:
    """Every command and option a user can type is one --help lists: no old spelling lingers unseen."""
    for name, cmd in COMMANDS.items():
        assert not cmd.hidden, f"{name} is a hidden command"
        for p in options(cmd):
            assert not p.hidden, f"{name}: {p.opts} is a hidden option"


@pytest.mark.parametrize("old", ["compare", "calibrate", "cleanup", "submit", "status", "nodes"])
def test_an_old_top_level_spelling_is_an_unknown_command(old: str, headroom: Headroom) -> None:
    res = headroom(old, "--help")
    assert res.returncode == 2 and len(res.lines) == 1 and "No such command" in res.lines[0], res.stderr


def test_the_sweep_flags_are_the_typed_overrides() -> None:
    """Each flag that sets the experiment is one field of ExperimentOverrides (no hand-kept list of names)."""
    from orchestrator.spec.experiment import ExperimentOverrides

    sweep = LEAVES["sweep"]
    not_the_experiment = {
        "store_path",
        "enforcement",
        "experiment_file",
        "resume",
        "old_run_id",
        "fmt",
        "as_json",
        "no_canary",
        "oracle_check",  # a check run before the sweep (a run of its own), not a field of the experiment
        "kube_context__old_spelling",
        "full_report",
    }
    params = {p.name for p in sweep.params} - not_the_experiment
    assert params == set(ExperimentOverrides.model_fields)


def test_sweep_defaults_are_the_experiment_s() -> None:
    """A flag left out and a field left out mean the same: an experiment file is not overridden by a default."""
    from orchestrator.commands.experiment_flags import parse_multipliers
    from orchestrator.spec.experiment import Experiment

    sweep = LEAVES["sweep"]
    with click.Context(sweep) as ctx:
        default = {p.name: p.get_default(ctx) for p in sweep.params}
    model = Experiment(tasks_dir=".")
    assert (default["attempts"], default["concurrency"], default["seed"]) == (
        model.attempts,
        model.concurrency,
        model.seed,
    )
    assert default["timeout_multiplier"] == model.timeout_multiplier
    assert default["retries"] == model.retry.max_retries
    assert (default["agent_kind"], default["backend_name"], default["placement"]) == (
        model.agent.kind,
        model.backend,
        model.placement,
    )
    assert parse_multipliers(default["multipliers"]) == model.configurations
