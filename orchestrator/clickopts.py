"""The shared-option class, and the options both command lines declare: the CLI's and the controller's process.

``python -m orchestrator.controller`` parses its own command line without importing the CLI
(orchestrator/controller/main.py), yet ``headroom cluster controller`` is the same command, so the
options they share are declared here, below both. Every other shared option is in
orchestrator/commands/options.py; each is a :class:`SharedOption`, which is how
tests/cli/test_conventions.py tells a shared option from a command's own spelling of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class SharedOption(click.Option):
    """An option declared once, here or in orchestrator/commands/options.py (the convention test holds every
    command to using it)."""


def shared_option(*decls: str, **kw: Any) -> Callable[[F], F]:
    return click.option(*decls, cls=SharedOption, **kw)


def namespace_option(help: str = "namespace (default: the context's, else 'default')") -> Callable[[F], F]:
    return shared_option("--namespace", "-n", help=help)


def kubeconfig_option(
    help: str = "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)",
    envvar: str | None = "KUBECONFIG",
) -> Callable[[F], F]:
    return shared_option("--kubeconfig", type=click.Path(path_type=Path), envvar=envvar, help=help)


def keep_pods_option(help: str = "keep trial pods after their result is recorded (for debugging)") -> Callable[[F], F]:
    return shared_option("--keep-pods", is_flag=True, help=help)
