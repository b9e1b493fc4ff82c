"""Agent data cannot break storage (issue 19, item 4), with the real SQLite store and the real CLI.

An agent's self-report holds lone surrogates, a link it leaves has a name that is not
UTF-8: both once made storing the try raise, which aborted the sweep (a concurrent honest
trial was abandoned) and every ``--resume`` after it. Now every agent string is made valid
UTF-8 at one choke point (``settle``), and a store that still refuses a try's evidence gets
that try recorded as ``harness_error`` with the reason, while the run goes on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.hostile.harness import assert_nothing_leaks, requires_sandbox, sweep, write_hostile_task

pytestmark = [pytest.mark.slow, requires_sandbox]

POISON = "poison-7f3a9c"
HOSTILE = r"""
python3 - <<'PY'
import os
logs, wd = os.environ["HEADROOM_LOGS_DIR"], os.environ["HEADROOM_WORKDIR"]
# JSON escapes that decode to lone surrogates, in every field the self-report keeps
open(os.environ["HEADROOM_AGENT_RESULT"], "w").write(
    '{"answer": "a\\ud800b", "model": "m\\udfff", "tokens_in": 1}')
# names that are not UTF-8: a file, and a link into the tests (the link check removes and lists it)
open(os.path.join(wd.encode(), b"bad-\xff-name"), "w").write("x")
os.symlink(os.environ["HEADROOM_TASK_DIR"] + "/tests/expected.txt", os.path.join(wd.encode(), b"link-\xfe-x"))
os.write(1, b"raw bytes \xff\xfe and " + os.environ.get("MARK", "").encode() + b"\n")
PY
"""


def _tasks(tasks_root: Path, mark: str = "") -> str:
    write_hostile_task(tasks_root, "hostile", f"export MARK={mark}\n{HOSTILE}")
    _, expected = write_hostile_task(tasks_root, "honest", "")
    (tasks_root / "honest" / "environment" / "attack.sh").write_text(f'echo {expected} > "$HEADROOM_WORKDIR/answer"\n')
    return expected


def _by_task(run) -> dict[str, tuple[str, str | None]]:  # type: ignore[no-untyped-def]
    s = Store.open_existing(run.store)
    try:
        rows = s.db.execute(
            "SELECT t.task_id, e.outcome, e.reason FROM executions e JOIN trials t USING (run_id, trial_id) "
            "WHERE e.run_id=? AND e.final=1",
            (run.run_id,),
        ).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}
    finally:
        s.close()


def test_surrogates_and_undecodable_names_are_stored_as_escapes(tasks_root: Path, tmp_path: Path) -> None:
    _tasks(tasks_root)
    run = sweep(tasks_root, tmp_path, concurrency=2)
    assert _by_task(run) == {"hostile": ("failed", None), "honest": ("passed", None)}
    hostile = next(e for e in run.evidence if e["agent_result"])
    assert hostile["agent_result"]["answer"] == "a\\ud800b" and hostile["agent_result"]["model"] == "m\\udfff"
    assert hostile["extra"]["verifier_only_links_removed"] == 1  # the link with the undecodable name, judged
    assert "raw bytes \ufffd\ufffd and" in hostile["agent"]["stdout_tail"]
    assert_nothing_leaks(run)


def _poison(store: Path) -> None:
    """A real SQLite refusal the sanitiser cannot prevent: a trigger rejects evidence holding the marker."""
    Store(store).close()
    db = sqlite3.connect(store)
    db.execute(
        f"CREATE TRIGGER refuse BEFORE INSERT ON evidence WHEN NEW.json LIKE '%{POISON}%' "
        "BEGIN SELECT RAISE(ABORT, 'evidence refused by a test trigger'); END"
    )
    db.commit()
    db.close()


def test_a_try_whose_evidence_cannot_be_stored_is_a_harness_error_and_the_run_goes_on(
    tasks_root: Path, tmp_path: Path
) -> None:
    _tasks(tasks_root, mark=POISON)
    _poison(tmp_path / "h.db")
    run = sweep(tasks_root, tmp_path, "--retries", "2", concurrency=2)
    assert _by_task(run) == {"hostile": ("harness_error", "orchestrator_error"), "honest": ("passed", None)}
    hostile = next(e for e in run.evidence if "storage_error" in e["extra"])
    assert "evidence refused by a test trigger" in hostile["extra"]["storage_error"], hostile
    assert POISON not in str(hostile)

    # A crash left the hostile try running: the resume runs it again, records it again, and finishes.
    db = sqlite3.connect(run.store)
    db.execute(
        "UPDATE executions SET status='running', final=0, outcome=NULL, reason=NULL WHERE outcome='harness_error'"
    )
    db.execute("UPDATE runs SET status='interrupted'")
    db.commit()
    db.close()
    proc = run_cli("resume", "--store", str(run.store), "--format", "none", env={"SHORTPW": "x"})
    assert proc.returncode == 0, proc.stderr
    s = Store.open_existing(run.store)
    try:
        rows = s.db.execute("SELECT status, outcome, reason, final FROM executions ORDER BY trial_id, try").fetchall()
        assert s.run(run.run_id).status == "finished"
    finally:
        s.close()
    finals = sorted((r["outcome"], r["reason"] or "") for r in rows if r["final"] and r["status"] == "finished")
    assert finals == [("harness_error", "orchestrator_error"), ("passed", "")], [tuple(r) for r in rows]
    assert ("abandoned", None, None, 0) in [tuple(r) for r in rows]
