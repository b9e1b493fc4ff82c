"""Options every command shares, declared once: the store, a run's name, ``--json``, the kube context.

A command that takes a store uses ``@store_option()``; one that names a run takes ``RUN`` typed
``RunRef`` (a run id in ``--store``, a store file for its latest run, or ``FILE:RUN_ID``); one that
lists or reports state takes ``@json_option``. Old spellings stay as hidden aliases that print
one deprecation line, for one release.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.store.sqlite import Store

#: Where every command reads and writes runs unless told otherwise (the one definition).
DEFAULT_STORE = Path("headroom-results/headroom.db")
F = TypeVar("F", bound=Callable[..., Any])


def store_option(*, default: Path | None = DEFAULT_STORE, required: bool = False,
                 help: str = "the results store (SQLite file)") -> Callable[[F], F]:
    return click.option("--store", "store_path", type=click.Path(path_type=Path, dir_okay=False), default=default,
                        required=required, show_default=default is not None, help=help)


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
            self.fail(f"{text!r} names a file but no run; give FILE:RUN_ID, or FILE alone for its latest run",
                      param, ctx)
        return RunName(text)


RUN_HELP = "RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store."


def run_argument(*, required: bool = False, name: str = "run") -> Callable[[F], F]:
    if required:
        return click.argument(name, type=RunRef(), required=True)
    return click.argument(name, type=RunRef(), required=False, default=RunName(None))


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="print JSON (one document on stdout) instead of a table")(f)


def deprecated(old: str, new: str) -> None:
    click.echo(f"warning: {old} is deprecated and will be removed in the next release; use {new}", err=True)


def kube_context_option(help: str = "kubeconfig context") -> Callable[[F], F]:
    """``--kube-context``; ``--context`` stays as a hidden alias (the cluster commands used to spell it so)."""

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, kube_context: str | None = None, context_alias: str | None = None, **kw: Any) -> Any:
            if context_alias is not None:
                deprecated("--context", "--kube-context")
                if kube_context is not None and kube_context != context_alias:
                    raise UserError("give --kube-context once (--context is its old name)", field="--kube-context")
                kube_context = context_alias
            return f(*args, kube_context=kube_context, **kw)

        wrapper = click.option("--context", "context_alias", hidden=True)(wrapper)
        return click.option("--kube-context", "kube_context", help=help)(wrapper)  # type: ignore[return-value]

    return decorate


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
        raise UserError(f"--format {fmt} writes {fmt}, but the file name says {implied}; drop --format or rename "
                        "the file", field="--output", file=str(output))
    return fmt
