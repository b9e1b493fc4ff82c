"""One definition of each thing two layers must agree on (issue 22): the label sanitiser, the default store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.controller import reconcile
from orchestrator.spec import names

#: A Kubernetes label value: at most 63 characters, alphanumeric at both ends, [-A-Za-z0-9_.] between.
K8S_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
ROOT = Path(__file__).resolve().parents[2]


def test_the_controller_labels_trials_as_the_backends_label_pods() -> None:
    """A Trial resource and its pod carry the same task label only if both use the same function."""
    assert reconcile.label_value is names.label_value


@pytest.mark.parametrize("text", ["fix-git", "a..b++c", "-x-", "é-task", "x" * 80, "1x/1.5x", "++", "_a_"])
def test_label_values_are_valid(text: str) -> None:
    value = names.label_value(text)
    assert len(value) <= 63 and K8S_LABEL_VALUE.fullmatch(value), value


def test_one_default_store() -> None:
    defined = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "orchestrator").rglob("*.py")
        if re.search(r"^DEFAULT_STORE\s*=", p.read_text(), re.M)
    ]
    assert defined == ["orchestrator/commands/options.py"]
