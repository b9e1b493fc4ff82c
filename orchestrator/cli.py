"""The ``headroom`` command line: the group, every command registered in one place, and ``main``.

Commands live in orchestrator/commands/, one module per job; options they share (``--store``,
a run's name, ``--json``, ``--kube-context``) are declared once in orchestrator/commands/options.py.
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
from orchestrator.errors import UserError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@click.version_option(package_name="headroom")
def cli() -> None:
    """headroom: benchmark sweeps with separate resource requests and limits, real enforcement and honest statistics.

    Start with `headroom demo`, or `headroom tasks validate DIR` then `headroom sweep DIR`; `headroom runs` lists
    what a store holds and `headroom report RUN` reports one.
    """


# Running
for _command in (run.sweep, run.resume, run.demo, run.cleanup):
    cli.add_command(_command)
# Reading results
for _command in (reporting.runs, reporting.report, reporting.compare, calibrate.calibrate, view.view, bundle.bundle,
                 bundle.verify, trust.regrade_cmd, reporting.schema):
    cli.add_command(_command)
# Tasks, and results made elsewhere
cli.add_command(tasks.tasks)
for _command in (trust.provenance_cmd, taskimage.image, *cluster.TASK_COMMANDS):
    tasks.tasks.add_command(_command)
cli.add_command(trust.audit_cmd)
cli.add_command(trust.judge_group)
cli.add_command(results.results)
# The cluster
for _command in (*cluster.COMMANDS, nodes.nodes):
    cli.add_command(_command)


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
        err.print(f"[bold red]error:[/] {escape(exc.one_line())}", soft_wrap=True)  # a label or path may hold [ ]
        sys.exit(2)
    except sqlite3.DatabaseError as exc:  # the store failed under us: a full disk, a corrupt or vanished file
        from orchestrator.store.sqlite import store_error

        err.print(f"[bold red]error:[/] store: {store_error(exc)}", soft_wrap=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
