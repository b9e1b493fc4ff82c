"""Every exception headroom defines lives in orchestrator/errors.py's one tree, with a one-line docstring, and
the CLI's edge (``cli.EXIT_MAP``) ends each kind a user can meet with one line and exit 2.

The package is imported module by module, so a class added anywhere (whatever it derives from: a builtin, a
client library's error, another of ours) is found without this file naming it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types

import click
import pytest

import orchestrator
from orchestrator import errors
from orchestrator.cli import EXIT_MAP, exit_for
from orchestrator.errors import (
    CgroupUnavailable,
    HeadroomError,
    KubeConfigError,
    LabelError,
    NotFaithful,
    SandboxUnavailable,
    SchemaError,
    ShutDown,
    Tainted,
    Unavailable,
    UserError,
)

#: Modules that cannot or must not be imported by headroom's interpreter: the Harbor adapter runs in Harbor's
#: (it defines no exception); a ``__main__`` runs its command when imported.
NOT_IMPORTED = {"orchestrator.agents.harbor.adapter"}
#: Outside the tree, on purpose: agents/exec/__init__.py is a client copied alone into an agent's environment,
#: and imports nothing from headroom (its docstring says so; tests/agents/test_exec_client.py runs such a copy).
OUTSIDE = {"orchestrator.agents.exec.ExecChannelError"}


def package_modules() -> list[types.ModuleType]:
    names = [m.name for m in pkgutil.walk_packages(orchestrator.__path__, "orchestrator.")]
    return [
        importlib.import_module(name) for name in names if name not in NOT_IMPORTED and not name.endswith(".__main__")
    ]


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a module of the package defines, by its qualified name."""
    found: dict[str, type[BaseException]] = {}
    for module in package_modules():
        for _name, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("orchestrator"):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def tree() -> list[type[HeadroomError]]:
    return [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, BaseException)]


def kinds() -> list[type[HeadroomError]]:
    return HeadroomError.__subclasses__()


def test_every_exception_in_the_package_lives_in_the_tree() -> None:
    found = defined_exceptions()
    assert len(found) > len(OUTSIDE), "the walk found no exception class: it is looking in the wrong place"
    stray = sorted(name for name in found if not name.startswith("orchestrator.errors.") and name not in OUTSIDE)
    assert stray == [], f"define these in orchestrator/errors.py, under their kind: {stray}"
    # the exemption is still needed, and still true: the copied client imports nothing from headroom
    exec_client = importlib.import_module("orchestrator.agents.exec")
    assert set(found) >= OUTSIDE
    source = inspect.getsource(exec_client)
    assert "from orchestrator" not in source.replace("from orchestrator.agents import exec as hx", "")


def test_the_modules_not_imported_define_no_exception_either() -> None:
    root = next(iter(orchestrator.__path__))
    skipped = [m.name for m in pkgutil.walk_packages(orchestrator.__path__, "orchestrator.")]
    skipped = [name for name in skipped if name in NOT_IMPORTED or name.endswith(".__main__")]
    assert "orchestrator.agents.harbor.adapter" in skipped
    for name in skipped:
        path = f"{root}/{name.removeprefix('orchestrator.').replace('.', '/')}.py"
        with open(path, encoding="utf-8") as f:
            classes = [n for n in ast.walk(ast.parse(f.read())) if isinstance(n, ast.ClassDef)]
        bases = [ast.unparse(b) for c in classes for b in c.bases]
        assert not [b for b in bases if b.endswith(("Error", "Exception", "Exit", "Interrupt"))], (name, bases)


def test_every_class_of_the_tree_has_a_kind_and_a_one_line_docstring() -> None:
    for cls in tree():
        doc = (cls.__doc__ or "").strip()
        assert doc, f"{cls.__name__} has no docstring"
        assert "\n" not in doc, f"{cls.__name__}'s docstring is more than one line: {doc!r}"
        assert issubclass(cls, HeadroomError), f"{cls.__name__} is not under HeadroomError"
        if cls is not HeadroomError:
            assert [k for k in kinds() if issubclass(cls, k)], f"{cls.__name__} belongs to no kind"
    assert {k.__name__ for k in kinds()} == {"UserError", "Unavailable", "TryFault", "Signal", "InternalError"}


def test_errors_imports_nothing_from_the_package() -> None:
    # the bottom layer of .importlinter, said here too so that the reason is next to the tree
    source = inspect.getsource(errors)
    assert "import orchestrator" not in source and "from orchestrator" not in source and "from ." not in source


def test_callers_still_catch_by_the_builtin_base_they_used() -> None:
    # moving a class must not change what an ``except RuntimeError`` / ``except ValueError`` around it catches
    assert issubclass(SandboxUnavailable, RuntimeError) and issubclass(CgroupUnavailable, RuntimeError)
    assert issubclass(LabelError, ValueError) and issubclass(SchemaError, ValueError)


def test_the_cli_map_covers_every_user_facing_kind() -> None:
    assert set(errors.USER_FACING) == {UserError, Unavailable}
    for kind in errors.USER_FACING:
        rows = [row for row, _ in EXIT_MAP if issubclass(kind, row)]
        assert rows, f"cli.EXIT_MAP has no row for {kind.__name__}"
    leaves = [cls for cls in tree() if issubclass(cls, errors.USER_FACING)]
    for cls in leaves:
        exc = NotFaithful("local", ["needs a GPU"]) if cls is NotFaithful else cls("the reason")
        ends = exit_for(exc)
        assert ends is not None and ends.code == 2, cls.__name__
        assert ends.line is not None and ends.line.startswith("[bold red]error:[/] "), cls.__name__


@pytest.mark.parametrize("exc", [Tainted("x"), ShutDown(), SchemaError("x"), RuntimeError("x"), KeyError("x")])
def test_what_no_user_should_meet_is_not_hidden_behind_a_one_liner(exc: BaseException) -> None:
    # a try's fault, a loop's signal or headroom's own bug reaching the edge is a bug: its traceback is kept
    assert exit_for(exc) is None


def test_an_unavailable_part_is_printed_as_text_never_obeyed() -> None:
    # the reason can quote a path or a daemon's message: markup and terminal controls stay inert
    ends = exit_for(CgroupUnavailable("cannot create /sys/fs/cgroup/[bold]x\x1b[2J: Permission denied"))
    assert ends is not None and ends.code == 2
    assert ends.line is not None and "\x1b" not in ends.line and "\\[bold]" in ends.line


def test_a_user_error_keeps_its_file_field_and_line_breaks() -> None:
    ends = exit_for(KubeConfigError("kubeconfig not found: /nope"))
    assert ends is not None and ends.line == "[bold red]error:[/] kubeconfig not found: /nope"
    refused = exit_for(NotFaithful("docker", ["2 tasks need a GPU", "1 task needs arm64"]))
    assert refused is not None and refused.line is not None and refused.line.count("\n") == 2


def test_the_map_matches_a_subclass_before_its_base() -> None:
    for i, (kind, _) in enumerate(EXIT_MAP):
        later = [row for row, _ in EXIT_MAP[i + 1 :] if issubclass(row, kind) and row is not kind]
        assert later == [], f"{later} can never match: {kind.__name__} comes first"
    assert exit_for(click.exceptions.Abort()) is not None
    ends = exit_for(click.exceptions.Abort())
    assert ends is not None and (ends.code, ends.line) == (130, "aborted")
