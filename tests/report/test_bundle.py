"""``headroom bundle`` / ``headroom verify``: a leaderboard entry that anyone can recompute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.report import bundle as bundle_mod
from tests.cli_run import headroom
from tests.taskfactory import write_task

FIX = Path(__file__).parent.parent / "importers" / "fixtures"


@pytest.fixture(scope="module")
def imported_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("b")
    store = root / "h.db"
    assert (
        headroom("results", "import", str(FIX / "harbor_job"), str(FIX / "tb_run"), "--store", str(store)).returncode
        == 0
    )
    out = root / "bundles"
    out.mkdir()
    res = headroom("runs", "bundle", "--store", str(store), "--out-dir", str(out))
    assert res.returncode == 0, res.stderr
    [path] = out.iterdir()
    return path


def test_a_bundle_verifies_and_is_named_by_its_content(imported_bundle: Path) -> None:
    data = json.loads(imported_bundle.read_text())
    assert imported_bundle.name.endswith(f"-{data['content_sha256'][:16]}.headroom-bundle.json")
    assert data["content_sha256"] == bundle_mod.content_digest(data["body"])
    assert len(data["body"]["trials"]) == 16 and data["body"]["run"]["axis"] == "labels"
    assert data["body"]["published"]["configurations"][0]["n"] == 8
    res = headroom("runs", "verify", str(imported_bundle), "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    result = json.loads(res.stdout)
    assert result["ok"] and result["trials"] == 16 and any("published values recomputed" in c for c in result["checks"])


def test_changing_a_trial_is_caught_even_when_the_digest_is_redone(imported_bundle: Path, tmp_path: Path) -> None:
    data = json.loads(imported_bundle.read_text())
    trial = next(t for t in data["body"]["trials"] if t["executions"][0]["outcome"] == "failed")
    trial["executions"][0]["outcome"] = "passed"
    data["content_sha256"] = bundle_mod.content_digest(data["body"])  # a forger re-hashes
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    res = headroom("runs", "verify", str(forged), "--format", "json")
    assert res.returncode == 1
    problems = json.loads(res.stdout)["problems"]
    assert any("score_infra_as_failure.estimate" in p and "recomputed" in p for p in problems)


def test_changing_a_published_number_breaks_the_content_digest(imported_bundle: Path, tmp_path: Path) -> None:
    data = json.loads(imported_bundle.read_text())
    data["body"]["published"]["configurations"][0]["score_infra_as_failure"]["estimate"] = 0.99
    edited = tmp_path / imported_bundle.name  # the same (now wrong) content name
    edited.write_text(json.dumps(data))
    res = headroom("runs", "verify", str(edited), "--format", "json")
    assert res.returncode == 1
    problems = json.loads(res.stdout)["problems"]
    assert any(p.startswith("content digest") for p in problems)
    assert any(p.startswith("file name carries digest") for p in problems)
    assert any("published 0.99" in p for p in problems)


def test_task_directories_are_checked_against_the_digests(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "ok", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path / "s.db"
    res = headroom(
        "sweep",
        str(tasks),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "1",
        "--store",
        str(store),
        "--format",
        "none",
    )
    assert res.returncode == 0, res.stderr
    path = tmp_path / "entry.json"
    assert headroom("runs", "bundle", "--store", str(store), "-o", str(path)).returncode == 0
    good = headroom("runs", "verify", str(path), "--tasks", str(tasks))
    assert good.returncode == 0 and "1/1 task directories match" in good.stdout, good.stdout
    (tasks / "ok" / "instruction.md").write_text("a different task\n")
    bad = headroom("runs", "verify", str(path), "--tasks", str(tasks))
    assert bad.returncode == 1 and "content differs" in bad.stdout


def test_not_a_bundle_is_a_one_line_error(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_text('{"schema": "something else"}')
    res = headroom("runs", "verify", str(f))
    assert res.returncode == 2 and "not a headroom bundle" in res.stderr and "Traceback" not in res.stderr
