"""The shapes of command group the CLI needs beyond click's own.

``OrderedGroup``: the top level, listed as registered. ``ListingGroup``: a noun whose bare form lists (``headroom runs`` lists runs, as ``headroom runs list``
does), the way ``kubectl get``-style nouns and Harbor's ``jobs`` read.
"""

from __future__ import annotations

from typing import Any

import click


class ListingGroup(click.Group):
    """A group that runs its ``list`` command when given no command (only options, or nothing)."""

    def __init__(self, *args: Any, default: str = "list", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default = default

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        help_asked = bool(args) and args[0] in ctx.help_option_names
        if not help_asked and (not args or args[0].startswith("-")):
            args = [self.default, *args]
        return super().parse_args(ctx, args)


class OrderedGroup(click.Group):
    """Lists its commands in the order they were added (the everyday verbs first, then the nouns)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)
