"""The shapes of command group the CLI needs beyond click's own.

``OrderedGroup``: the top level, listed as registered. ``ListingGroup``: a noun whose bare form lists (``headroom runs`` lists runs, as ``headroom runs list``
does), the way ``kubectl get``-style nouns and Harbor's ``jobs`` read. ``moved``: a command's old
top-level spelling, hidden and printing one deprecation line, for one release.
"""

from __future__ import annotations

from typing import Any

import click

from orchestrator.commands.options import deprecated


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


class _MovedCommand(click.Command):
    new_path = ""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        deprecated(f"headroom {self.name}", f"headroom {self.new_path}")  # first: before any error about the args
        return super().parse_args(ctx, args)


class _MovedGroup(click.Group):
    new_path = ""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        deprecated(f"headroom {self.name}", f"headroom {self.new_path}")
        return super().parse_args(ctx, args)


def moved(target: click.Command, old_name: str, new_path: str) -> click.Command:
    """``target`` under its old top-level name: hidden, the same parameters and callback, one deprecation line."""
    common: dict[str, Any] = {
        "name": old_name,
        "params": target.params,
        "callback": target.callback,
        "help": target.help,
        "short_help": target.short_help,
        "hidden": True,
        "context_settings": target.context_settings,
        "epilog": target.epilog,
        "add_help_option": target.add_help_option,
    }
    alias: _MovedCommand | _MovedGroup
    if isinstance(target, click.Group):
        alias = _MovedGroup(commands=target.commands, invoke_without_command=target.invoke_without_command, **common)
    else:
        alias = _MovedCommand(**common)
    alias.new_path = new_path
    return alias
