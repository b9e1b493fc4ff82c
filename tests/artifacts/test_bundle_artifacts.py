"""A bundle carries each artifact's digest (not its content); verify checks the manifest, and against a store
that holds the artifacts, every digest against its content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.artifacts.sink import StoreSink, TryKey
from orchestrator.report import bundle as bundle_mod
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom
from tests.taskfactory import write_task


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bundle-artifacts")
    write_task(root / "tasks", "one", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = root / "h.db"
    res = headroom(
        "sweep",
        str(root / "tasks"),
        "--multipliers",
        "1",
        "--attempts",
        "2",
        "--store",
        str(store),
        "--format",
        "none",
        "--no-canary",
    )
    assert res.returncode == 0, res.stderr
    s = Store.open_existing(store)
    run_id = s.runs()[0].run_id
    tries = s.db.execute("SELECT trial_id, try FROM executions WHERE run_id=?", (run_id,)).fetchall()
    s.close()
    sink = StoreSink(store)
    for trial_id, try_index in tries:
        sink.add_bytes(TryKey(run_id, trial_id, try_index), "logs/link", b"")
    sink.close()
    res = headroom("runs", "bundle", "--store", str(store), "-o", str(root / "run.json"))
    assert res.returncode == 0, res.stderr
    return root / "run.json", store


def test_the_bundle_carries_digests_and_verifies_against_the_store(bundled: tuple[Path, Path]) -> None:
    path, store = bundled
    body = json.loads(path.read_text())["body"]
    # the backend kept both steps' output of each try; the test added a logs file to each
    assert len(body["artifacts"]) == 10 and all("data" not in a for a in body["artifacts"])
    assert {a["name"] for a in body["artifacts"]} == {
        "agent/stdout",
        "agent/stderr",
        "verifier/stdout",
        "verifier/stderr",
        "logs/link",
    }
    res = headroom("runs", "verify", str(path), "--store", str(store), "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    checks = json.loads(res.stdout)["checks"]
    assert any("10 artifact digests well-formed" in c for c in checks)
    assert any("10/10 artifacts found in the store" in c for c in checks)


def test_a_forged_digest_or_a_try_that_is_not_there_is_caught(bundled: tuple[Path, Path], tmp_path: Path) -> None:
    path, store = bundled
    data = json.loads(path.read_text())
    data["body"]["artifacts"][0]["sha256"] = "0" * 64
    data["body"]["artifacts"][1]["trial_id"] = "no-such-trial"
    data["content_sha256"] = bundle_mod.content_digest(data["body"])  # re-hashed by whoever forged it
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    res = headroom("runs", "verify", str(forged), "--store", str(store), "--format", "json")
    assert res.returncode == 1
    problems = json.loads(res.stdout)["problems"]
    assert any("no content with sha256 " + "0" * 64 in p for p in problems)
    assert any("no-such-trial" in p and "no such try" in p for p in problems)
    without_store = headroom(
        "runs", "verify", str(forged), "--format", "json"
    )  # the manifest alone still sees the stray try
    assert without_store.returncode == 1 and any(
        "no such try" in p for p in json.loads(without_store.stdout)["problems"]
    )
