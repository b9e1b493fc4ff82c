"""A backend declares what it can do once (``BackendAbilities``), is held to it, and is refused by it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from orchestrator import backends
from orchestrator.backends.abilities import METHODS, fit_checker, refuse_flags
from orchestrator.engine.sweep import check_fit
from orchestrator.errors import UserError
from orchestrator.spec.backend import BackendAbilities
from tests.cli_run import headroom as run_cli


@pytest.mark.parametrize("name", backends.names())
def test_every_backend_declares_exactly_the_optional_methods_it_has(name: str) -> None:
    cls = backends.backend_class(name)
    declared = cls.abilities
    assert isinstance(declared, BackendAbilities)
    for ability, methods in METHODS.items():
        has = [callable(getattr(cls, m, None)) for m in methods]
        assert all(has) == getattr(declared, ability) and any(has) == all(has), (name, ability, has)


def test_only_the_kubernetes_backend_takes_the_cluster_flags() -> None:
    kube, local = backends.declared_abilities("kubernetes"), backends.declared_abilities("local")
    refuse_flags("kubernetes", kube, ["--namespace", "--kube-context", "--queue", "--keep-pods", "--force"])
    with pytest.raises(
        UserError,
        match=r"--namespace, --queue apply to --backend kubernetes \(this run uses local, "
        r"which would ignore them\)$",
    ):
        refuse_flags("local", local, ["--namespace", "--queue"])
    with pytest.raises(UserError, match="--build applies to --backend docker"):
        refuse_flags("kubernetes", kube, ["--build"])
    refuse_flags("docker", backends.declared_abilities("docker"), ["--build"])


class _Fits:
    """STAND-IN for a backend's fit check (no cluster here): records what the engine asked, refuses on demand."""

    def __init__(self, declared: bool) -> None:
        self.abilities = BackendAbilities(check_fit=declared)
        self.asked: list[Any] = []

    def check_fit(self, needs: Sequence[Any], placement: str = "default") -> None:
        self.asked.append((list(needs), placement))


def test_the_engine_calls_an_ability_only_when_declared() -> None:
    undeclared, declared = _Fits(False), _Fits(True)
    assert fit_checker(undeclared) is None  # type: ignore[arg-type]
    check_fit(undeclared, [], [], "limit-aware")  # type: ignore[arg-type]
    check_fit(declared, [], [], "limit-aware")  # type: ignore[arg-type]
    assert undeclared.asked == [] and declared.asked == [([], "limit-aware")]


def test_cleanup_refuses_a_flag_the_local_backend_would_ignore() -> None:
    res = run_cli("runs", "cleanup", "--force", timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--force applies to --backend kubernetes (this run uses local" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", backends.names())
def test_a_backend_declares_what_it_can_do_in_one_place(name: str) -> None:
    """No second declaration beside ``abilities``: no capabilities, no enforcement string of its own."""
    cls = backends.backend_class(name)
    assert not hasattr(cls, "capabilities") and not hasattr(cls, "enforcement")
    assert cls.abilities.enforcement and cls.abilities.isolation != "none"
    assert backends.declared_abilities(name) is cls.abilities
