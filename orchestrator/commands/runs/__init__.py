"""``headroom runs``: the runs in a store. The group, and each of its commands from its own module."""

from __future__ import annotations

import click

from orchestrator.commands.groups import ListingGroup
from orchestrator.commands.runs import bundle, calibrate, cleanup, compare, export, listing, regrade


@click.group("runs", cls=ListingGroup, short_help="the runs in a store: list, compare, calibrate, bundle ...")
def runs() -> None:
    """The runs in a store: list them (`headroom runs` alone lists), compare two, calibrate, re-grade, bundle.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """


for _command in (
    listing.list_runs,
    listing.show,
    compare.compare,
    calibrate.calibrate,
    regrade.regrade_cmd,
    bundle.bundle,
    bundle.verify,
    export.export,
    cleanup.cleanup,
):
    runs.add_command(_command)
