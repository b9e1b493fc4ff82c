"""Options every command shares, declared once: a command takes them from here, never spells its own.

A command that takes a store uses ``@store_option()``; one that names a run takes ``RUN`` typed
``RunRef`` (a run id in ``--store``, a store file for its latest run, or ``FILE:RUN_ID``); one that
lists or reports state takes ``@json_option``, or ``@format_option(...)`` whose ``json`` choice
brings ``--json`` with it. Every option made here is a ``SharedOption``, which is how
tests/cli/test_conventions.py tells a shared option from a command's own spelling of it. There are
no hidden old spellings (nobody used 0.1.0's).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from orchestrator import backends
from orchestrator.clickopts import SharedOption as SharedOption
from orchestrator.clickopts import keep_pods_option as keep_pods_option
from orchestrator.clickopts import kubeconfig_option as kubeconfig_option
from orchestrator.clickopts import namespace_option as namespace_option
from orchestrator.clickopts import shared_option
from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.store.sqlite import Store

#: Where every command reads and writes runs unless told otherwise (the one definition).
DEFAULT_STORE = Path("headroom-results/headroom.db")
F = TypeVar("F", bound=Callable[..., Any])


def _option(*decls: str, **kw: Any) -> Callable[[F], F]:
    return shared_option(*decls, **kw)


# ---- the store and runs ------------------------------------------------------------------------


def store_option(
    *, default: Path | None = DEFAULT_STORE, required: bool = False, help: str = "the results store (SQLite file)"
) -> Callable[[F], F]:
    return _option(
        "--store",
        "store_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=default,
        required=required,
        show_default=default is not None,
        help=help,
    )


@dataclass(frozen=True)
class RunName:
    """A run as the user named it; ``open`` resolves it against the command's ``--store``."""

    text: str | None  # None: the latest run in --store

    def open(self, store_path: Path) -> tuple[Store, str]:
        from orchestrator.commands.runref import open_run
        from orchestrator.store.sqlite import Store

        if self.text is None:
            store = Store.open_existing(store_path)
            return store, store.run(None).run_id
        store, run_id = open_run(self.text, store_path)
        return store, store.run(run_id).run_id

    def run_id(self, store_path: Path) -> str:
        """The run's id where no store need hold it (``runs cleanup``): a bare id is taken as written.

        A store file or ``FILE:RUN_ID`` is resolved through the store, as everywhere else.
        """
        from orchestrator.commands.runref import looks_like_file

        if (
            self.text is not None
            and ":" not in self.text
            and not looks_like_file(self.text)
            and not Path(self.text).is_file()
        ):
            return self.text
        store, run_id = self.open(store_path)
        with store:
            return run_id


class RunRef(click.ParamType):
    """RUN: a run id in --store, a store file (its latest run), or FILE:RUN_ID."""

    name = "RUN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> RunName:
        if isinstance(value, RunName):
            return value
        text = str(value).strip()
        if not text:
            self.fail("empty run name; give a run id, a store file or FILE:RUN_ID", param, ctx)
        if text.endswith(":"):
            self.fail(
                f"{text!r} names a file but no run; give FILE:RUN_ID, or FILE alone for its latest run", param, ctx
            )
        return RunName(text)


RUN_HELP = (
    "RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store."
)


def run_argument(*, required: bool = False, name: str = "run") -> Callable[[F], F]:
    if required:
        return click.argument(name, type=RunRef(), required=True)
    return click.argument(name, type=RunRef(), required=False, default=RunName(None))


# ---- output --------------------------------------------------------------------------------------

JSON_HELP = "print JSON (one document on stdout) instead of a table"


def json_option(f: F) -> F:
    return _option("--json", "as_json", is_flag=True, help=JSON_HELP)(f)


#: Where ``--full-report`` leaves its value (``ctx.meta``): read where the run's report is printed.
FULL_REPORT = "headroom.full_report"


def _keep_full_report(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta[FULL_REPORT] = value
    return value


def full_report_option(f: F) -> F:
    """``--full-report`` of a command that runs trials: the whole report at the end instead of the summary."""
    return _option(
        "--full-report",
        is_flag=True,
        expose_value=False,
        callback=_keep_full_report,
        help="print the whole report when the run ends (default, as a table: the summary: the headline per "
        "configuration with its intervals, the infra-error rate and the recommendation; `headroom report` "
        "prints the rest)",
    )(f)


def format_option(
    choices: tuple[str, ...], *, default: str | None = "table", help: str | None = None
) -> Callable[[F], F]:
    """``--format`` over ``choices``; with a ``json`` choice, ``--json`` too (the same spelling as every listing).

    The command gets ``fmt``: the format given, else ``default`` (None: the command decides, as
    ``report`` does from ``--output``'s extension).
    """

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, fmt: str | None = None, as_json: bool = False, **kw: Any) -> Any:
            if as_json:
                source = click.get_current_context().get_parameter_source("fmt")
                if fmt != "json" and source is not click.core.ParameterSource.DEFAULT:
                    raise UserError(f"--json prints json, --format {fmt}; give one of them", field="--json")
                fmt = "json"
            return f(*args, fmt=fmt, **kw)

        command: Any = wrapper
        if "json" in choices:
            command = _option("--json", "as_json", is_flag=True, help="the same as --format json")(command)
        return _option(
            "--format",
            "fmt",
            type=click.Choice(choices),
            default=default,
            show_default=default is not None,
            help=help or ", ".join(choices),
        )(command)

    return decorate


def output_option(help: str = "write to this file instead of stdout") -> Callable[[F], F]:
    """``-o``/``--output`` is a FILE on every command, written instead of stdout (a directory is ``--out-dir``)."""
    return _option("--output", "-o", "output", type=click.Path(path_type=Path), help=help)


def out_dir_option(help: str, *, also: tuple[str, ...] = ()) -> Callable[[F], F]:
    """``--out-dir DIR``: where a command writes several files (``-o`` is always one FILE); ``also``: more
    spellings of it (``runs export --out``)."""
    return _option(*also, "--out-dir", "out_dir", type=click.Path(path_type=Path), help=help)


#: What a file's extension says its format is (``-o report.html`` means HTML unless --format says otherwise).
EXTENSION_FORMATS = {".html": "html", ".htm": "html", ".json": "json", ".md": "markdown", ".markdown": "markdown"}


def output_format(fmt: str | None, output: Path | None, choices: tuple[str, ...], default: str = "table") -> str:
    """--format if given; else what --output's extension says; else the default. A clash is a mistake."""
    implied = EXTENSION_FORMATS.get(output.suffix.lower()) if output is not None else None
    if implied is not None and implied not in choices:
        implied = None
    if fmt is None:
        return implied or default
    if implied is not None and implied != fmt:
        raise UserError(
            f"--format {fmt} writes {fmt}, but the file name says {implied}; drop --format or rename the file",
            field="--output",
            file=str(output),
        )
    return fmt


RULES_HELP = (
    "scoring rules shown side by side: auto (headroom's two, and an import's own rules), all, or "
    "names separated by commas: headroom:infra-as-failure, headroom:infra-excluded, "
    "terminal-bench:leaderboard, harbor:job-mean, terminal-bench-2:official"
)


def rules_option(help: str = RULES_HELP) -> Callable[[F], F]:
    return _option("--rules", default="auto", show_default=True, help=help)


# ---- running -------------------------------------------------------------------------------------

#: The flag defaults of a sweep; the Experiment model's defaults are the same (tests/cli/test_conventions.py).
ATTEMPTS, CONCURRENCY, SEED = 3, 2, 0


def attempts_option(*, default: int = ATTEMPTS, most: int = 10_000) -> Callable[[F], F]:
    return _option(
        "--attempts",
        type=click.IntRange(1, most),
        default=default,
        show_default=True,
        help="attempts per task and configuration",
    )


def concurrency_option(*, default: int = CONCURRENCY, most: int = 256) -> Callable[[F], F]:
    return _option(
        "--concurrency", type=click.IntRange(1, most), default=default, show_default=True, help="trials running at once"
    )


def seed_option() -> Callable[[F], F]:
    return _option(
        "--seed", type=int, default=SEED, show_default=True, help="seed of the plan's order and each trial's"
    )


def enforcement_option(help: str = "local backend: cgroup limits, or the rlimit fallback") -> Callable[[F], F]:
    return _option(
        "--enforcement", type=click.Choice(["auto", "cgroup", "rlimit"]), default="auto", show_default=True, help=help
    )


def backend_option(help: str = "where trials run (the experiment field 'backend')") -> Callable[[F], F]:
    return _option(
        "--backend", "backend_name", type=click.Choice(backends.names()), default="local", show_default=True, help=help
    )


def no_canary_option(
    help: str = "skip the enforcement canary (the report then says limits were not checked)",
) -> Callable[[F], F]:
    return _option("--no-canary", is_flag=True, help=help)


def agent_timeout_option() -> Callable[[F], F]:
    return _option(
        "--agent-timeout",
        type=click.FloatRange(min=0, min_open=True),
        help="agent timeout (s) for Harbor tasks that set none",
    )


# ---- Harbor's agents ----------------------------------------------------------------------------


def _harbor_agent(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from orchestrator.spec.experiment import HARBOR_IMPORT_PATH, HARBOR_NAME

    if value is not None and not (HARBOR_NAME.fullmatch(value) or HARBOR_IMPORT_PATH.fullmatch(value)):
        raise UserError(
            f"{value!r} is neither a Harbor agent name (terminus-2, claude-code, ...) nor 'module.path:ClassName'",
            field="--harbor-agent",
        )
    return value


def harbor_agent_option() -> Callable[[F], F]:
    """``--harbor-agent NAME``: run one of Harbor's agents (agent.kind harbor), by its Harbor name or import path."""
    return _option(
        "--harbor-agent",
        "harbor_agent",
        metavar="NAME",
        callback=_harbor_agent,
        help="run a Harbor agent unchanged (agent.kind: harbor): its Harbor name (terminus-2, claude-code, codex...) "
        "or 'module.path:ClassName'; needs scripts/harbor/install.sh (docs/agents.md)",
    )


def _agent_kwargs(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    import json

    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{item!r} is not KEY=VALUE", field="--agent-kwarg")
        raw = raw.strip()
        try:  # as Harbor's own --ak: a JSON value (a number, true, a list...), else the text itself
            value: Any = json.loads(raw)
        except ValueError:
            value = {"True": True, "False": False}.get(raw, raw)
        out[key.strip()] = value
    return out


def agent_kwarg_option() -> Callable[[F], F]:
    """``--agent-kwarg KEY=VALUE`` (repeatable): a keyword argument for a Harbor agent (agent.kwargs, Harbor's --ak)."""
    return _option(
        "--agent-kwarg",
        "agent_kwarg",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_agent_kwargs,
        help="--harbor-agent: a keyword argument for the agent, as Harbor's --ak (VALUE read as JSON, else text); "
        "repeatable",
    )


def harbor_agent_overrides(flags: dict[str, Any]) -> None:
    """``--harbor-agent`` makes the agent's kind ``harbor`` (its value is agent.name: a Harbor name, or a
    'module:Class' the experiment reads as agent.import_path); ``--agent-kwarg`` needs it."""
    if not flags.get("agent_kwarg"):
        flags["agent_kwarg"] = None  # none given: the experiment file's kwargs stay
    if flags.get("harbor_agent") is None:
        if flags["agent_kwarg"]:
            raise UserError("--agent-kwarg is for a Harbor agent: give --harbor-agent too", field="--agent-kwarg")
        return
    if flags.get("agent_command"):
        raise UserError(
            "a Harbor agent takes no command: give --harbor-agent or --agent-command", field="--harbor-agent"
        )
    flags["agent_kind"] = "harbor"


# ---- Kubernetes ------------------------------------------------------------------------------------


def kube_context_option(help: str = "kubeconfig context") -> Callable[[F], F]:
    """``--kube-context``: the kubeconfig context (``--context`` would read as a build context)."""
    return _option("--kube-context", "kube_context", help=help)


# --namespace, --kubeconfig and --keep-pods are declared in orchestrator/clickopts.py (imported above): the
# controller's own process takes them too, without importing the CLI.
