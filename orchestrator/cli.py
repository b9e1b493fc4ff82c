"""The ``headroom`` command line: the top-level group, assembled from the commands' modules and packages, and ``main``.

Commands live in orchestrator/commands/, whose files follow the tree: each everyday verb (sweep, resume,
demo, report, view, schema) in a module of its own, and each of the four nouns in one package or module that
holds the group and its commands: ``runs/``, ``tasks/``, ``results.py``, ``cluster/`` (docs/guide.md, "The
commands"). Options they share (``--store``, a run's name, ``--json``/``--format``, ``--namespace``, ...) are
declared once in orchestrator/commands/options.py; this module only assembles.
Nothing heavy is imported here: each command imports its engine when it runs, so ``--help`` is quick
(tests/cli/test_startup.py, benchmarks/bench_cli_startup.py).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from rich.markup import escape

from orchestrator.commands import cluster, demo, report, results, resume, runs, schema, sweep, tasks, view
from orchestrator.commands.console import err
from orchestrator.commands.groups import OrderedGroup
from orchestrator.errors import Unavailable, UserError
from orchestrator.report.safe import terminal_text


@click.group(cls=OrderedGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@click.version_option(package_name="headroom")
def cli() -> None:
    """headroom: benchmark sweeps with separate resource requests and limits, real enforcement and honest statistics.

    Start with `headroom demo`, or `headroom tasks validate DIR` then `headroom sweep DIR`; `headroom runs` lists
    what a store holds and `headroom report RUN` reports one.
    """


# The everyday verbs stay short, as Harbor keeps `harbor run` and Inspect `inspect eval` and `inspect view`.
for _command in (sweep.sweep, resume.resume, demo.demo, report.report, view.view, schema.schema):
    cli.add_command(_command)
# Nouns, each holding what acts on it (its package or module holds the group and its commands): the runs in a
# store, task sets, results made elsewhere, the cluster.
for _group in (runs.runs, tasks.tasks, results.results, cluster.cluster):
    cli.add_command(_group)


@dataclass(frozen=True)
class Exit:
    """How ``main`` ends for one exception: the exit code, and the line it prints first (rich markup, escaped)."""

    code: int
    line: str | None = None


def _error(text: str) -> Exit:
    return Exit(2, f"[bold red]error:[/] {text}")


def _said(exc: BaseException) -> Exit:
    # A label, path or task id may hold [ ] or a terminal control: printed as text, never obeyed. The line breaks
    # headroom's own message has (a refusal lists one class a line) stay line breaks.
    message = exc.one_line() if isinstance(exc, UserError) else str(exc)
    return _error("\n".join(terminal_text(line) for line in message.split("\n")))


def _usage(exc: click.UsageError) -> Exit:  # one line, like every other mistake, with where to look
    where = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
    return _error(f"{escape(exc.format_message())}{escape(where)}")


def _click(exc: click.ClickException) -> Exit:
    exc.show()
    return Exit(2 if exc.exit_code in (1, 2) else exc.exit_code)


def _missing_extra(exc: ModuleNotFoundError) -> Exit | None:  # a cluster or container path without its extra
    from orchestrator.extras import missing_extra

    needs_extra = missing_extra(exc)
    return None if needs_extra is None else _error(escape(needs_extra.one_line()))


def _store(exc: sqlite3.DatabaseError) -> Exit:  # the store failed under us: a full disk, a corrupt or vanished file
    from orchestrator.store.sqlite import store_error

    return _error(f"store: {store_error(exc)}")


#: What reaches the CLI's edge, in the order it is matched (a subclass before its base), and how each ends the
#: command; ``None`` from a handler: not ours after all, the exception goes on. Every kind a user can meet
#: (``errors.USER_FACING``) has its row (tests/engine/test_errors.py).
EXIT_MAP: tuple[tuple[type[BaseException], Callable[[Any], Exit | None]], ...] = (
    (click.exceptions.Abort, lambda _exc: Exit(130, "aborted")),
    (click.UsageError, _usage),
    (click.ClickException, _click),
    (UserError, _said),
    (Unavailable, _said),
    (ModuleNotFoundError, _missing_extra),
    (sqlite3.DatabaseError, _store),
    (click.exceptions.Exit, lambda exc: Exit(exc.exit_code)),
)


def exit_for(exc: BaseException) -> Exit | None:
    """How the CLI ends for ``exc`` (the first row of ``EXIT_MAP`` it is an instance of); None: let it propagate."""
    for kind, handle in EXIT_MAP:
        if isinstance(exc, kind):
            return handle(exc)
    return None


def main() -> None:
    try:
        rv = cli.main(standalone_mode=False)
    except Exception as exc:
        if (ends := exit_for(exc)) is None:
            raise
        if ends.line is not None:
            err.print(ends.line, soft_wrap=True)
        sys.exit(ends.code)
    sys.exit(rv if isinstance(rv, int) else 0)
