"""The ``headroom`` command line: the group, every command registered in one place, and ``main``.

Commands live in orchestrator/commands/, one module per job; options they share (``--store``,
a run's name, ``--json``/``--format``, ``--namespace``, ...) are declared once in orchestrator/commands/options.py.
The tree: the everyday verbs (sweep, resume, demo, report, view, schema) at the top, and four nouns:
``runs``, ``tasks``, ``results``, ``cluster`` (docs/guide.md, "The commands").
Nothing heavy is imported here: each command imports its engine when it runs, so ``--help`` is quick
(tests/cli/test_startup.py, benchmarks/bench_cli_startup.py).
"""

from __future__ import annotations

import sqlite3
import sys

import click
from rich.markup import escape

from orchestrator.commands import (
    bundle,
    calibrate,
    cluster,
    export,
    nodes,
    reporting,
    results,
    run,
    taskimage,
    tasks,
    trust,
    view,
)
from orchestrator.commands.console import err
from orchestrator.commands.groups import OrderedGroup
from orchestrator.errors import UserError
from orchestrator.report.safe import terminal_text


@click.group(cls=OrderedGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@click.version_option(package_name="headroom")
def cli() -> None:
    """headroom: benchmark sweeps with separate resource requests and limits, real enforcement and honest statistics.

    Start with `headroom demo`, or `headroom tasks validate DIR` then `headroom sweep DIR`; `headroom runs` lists
    what a store holds and `headroom report RUN` reports one.
    """


# The everyday verbs stay short, as Harbor keeps `harbor run` and Inspect `inspect eval` and `inspect view`.
for _command in (run.sweep, run.resume, run.demo, reporting.report, view.view, reporting.schema):
    cli.add_command(_command)
# Nouns, each holding what acts on it: the runs in a store, task sets, results made elsewhere, the cluster.
for _group, _commands in (
    (
        reporting.runs,
        (
            reporting.compare,
            calibrate.calibrate,
            trust.regrade_cmd,
            bundle.bundle,
            bundle.verify,
            export.export,
            run.cleanup,
        ),
    ),
    (tasks.tasks, (trust.provenance_cmd, trust.audit_cmd, trust.judge_group, cluster.tasks_push, taskimage.image)),
    (results.results, ()),
    (cluster.cluster, (nodes.nodes,)),
):
    for _command in _commands:
        _group.add_command(_command)
    cli.add_command(_group)


def main() -> None:
    try:
        rv = cli.main(standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.UsageError as exc:  # one line, like every other mistake, with where to look
        where = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        err.print(f"[bold red]error:[/] {escape(exc.format_message())}{escape(where)}", soft_wrap=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except UserError as exc:
        # A label, path or task id may hold [ ] or a terminal control: printed as text, never obeyed. The line
        # breaks headroom's own message has (a refusal lists one class a line) stay line breaks.
        text = "\n".join(terminal_text(line) for line in exc.one_line().split("\n"))
        err.print(f"[bold red]error:[/] {text}", soft_wrap=True)
        sys.exit(2)
    except ModuleNotFoundError as exc:  # a cluster or container path without its extra installed
        from orchestrator.extras import missing_extra

        if (needs_extra := missing_extra(exc)) is None:
            raise
        err.print(f"[bold red]error:[/] {escape(needs_extra.one_line())}", soft_wrap=True)
        sys.exit(2)
    except sqlite3.DatabaseError as exc:  # the store failed under us: a full disk, a corrupt or vanished file
        from orchestrator.store.sqlite import store_error

        err.print(f"[bold red]error:[/] store: {store_error(exc)}", soft_wrap=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
