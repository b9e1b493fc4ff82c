"""Where no sandbox can be made, headroom says so: capability, provenance, every report format."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.agentio.redact import REDACTED, redact_text, secret_values
from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine.sweep import prepare, run, start
from orchestrator.errors import FilterUnavailable, SandboxUnavailable
from orchestrator.isolation import sandbox, seccomp
from orchestrator.report import document, render, terminal
from orchestrator.spec.experiment import Experiment
from orchestrator.store.sqlite import Store
from tests.taskfactory import write_task


def test_a_missing_bwrap_falls_back_loudly_or_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stands in for a machine without bubblewrap: the one thing this machine cannot be.
    real_which = sandbox.shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    backend = LocalBackend()
    try:
        assert backend.abilities.isolation == "none" and not backend.abilities.network_control
        assert any("NO ISOLATION (bubblewrap (bwrap) is not installed)" in n for n in backend.abilities.notes)
        assert backend.facts().local.sandbox == {"tool": None, "fallback_reason": "bubblewrap (bwrap) is not installed"}
    finally:
        backend.close()
    with pytest.raises(SandboxUnavailable):
        LocalBackend(isolation="sandbox")


def test_isolation_none_is_recorded_and_shown_in_every_report(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve='touch "$HEADROOM_WORKDIR/out"\n')
    exp = Experiment(tasks_dir=str(tasks_root), configurations=["unbounded"], attempts=1)
    store = Store(tmp_path / "h.db")
    backend = LocalBackend(isolation="none")
    try:
        run_id, tasks = start(exp, prepare(exp), store, backend)
        run(store, run_id, exp, tasks, backend)
    finally:
        backend.close()
    assert store.provenance(run_id).to_stored()["backend"]["abilities"]["isolation"] == "none"
    doc = document.build(store, run_id)
    assert doc.run.isolation == "none"
    buf = io.StringIO()
    terminal.print_report(doc, Console(file=buf, width=200, color_system=None))
    assert "isolation none: trials were not sandboxed" in buf.getvalue()
    assert "| isolation | **none** (NOT sandboxed" in render.render_text(doc, "markdown")
    assert "<strong>none</strong> (NOT sandboxed" in render.render_text(doc, "html")
    assert '"isolation": "none"' in render.render_text(doc, "json")


def test_named_secrets_are_redacted_whatever_their_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORTPW", "pw7")
    monkeypatch.setenv("SOME_TOKEN", "tiny")  # looks secret by name, too short to guess safely
    monkeypatch.setenv("EMPTY_SECRET", "")
    values = secret_values(["SHORTPW", "EMPTY_SECRET"])
    assert "pw7" in values and "tiny" not in values and "" not in values
    assert redact_text("the password is pw7", values) == f"the password is {REDACTED}"


def test_a_seccomp_filter_that_cannot_be_built_is_said_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stands in for a machine without libseccomp: the sandbox still runs, without the keyring filter, and says so.
    def no_filter() -> None:
        raise FilterUnavailable("libseccomp is not usable (RuntimeError: Unable to find libseccomp)")

    monkeypatch.setattr(seccomp, "build", no_filter)
    backend = LocalBackend()
    try:
        if backend.sandbox is None:
            pytest.skip("no bubblewrap sandbox here")
        assert backend.abilities.isolation == "namespaces"
        assert any(
            n.startswith("NO SECCOMP FILTER (libseccomp is not usable") and "kernel keyring" in n
            for n in backend.abilities.notes
        )
        assert backend.facts().local.sandbox["seccomp"] == {
            "filter": None,
            "fallback_reason": "libseccomp is not usable (RuntimeError: Unable to find libseccomp)",
        }
        assert "--seccomp" not in backend.sandbox.argv(sandbox.StepView(task_dir=Path("/"), task_entries=[]), ["true"])
    finally:
        backend.close()
