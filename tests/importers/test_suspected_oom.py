"""A Harbor trial whose agent step was SIGKILLed and then scored 0 is a suspected OOM: its own reason, inferred,
with its evidence; reports show the score with those trials as failures and as infra errors.

The jobs are written here in Harbor's job layout (tests/importers/formats.py): each trial's ``agent/`` directory
holds what Harbor leaves there (the oracle's ``exit-code.txt`` and ``oracle.txt``, an installed agent's
``command-N/return-code.txt`` and ``stdout.txt``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.importers.formats import H, write_harbor_job

BASH_KILLED = "Training...\n/solution/solve.sh: line 3:   812 Killed                  python3 train.py\n"

TRIALS = {
    # task: (trial, expected outcome, expected reason)
    "oracle-137-killed": (
        H("oracle-137-killed", 0.0, agent_files={"exit-code.txt": "137", "oracle.txt": BASH_KILLED}),
        "infra_error",
        "suspected_oom",
    ),
    "command-137": (
        H("command-137", 0.0, agent_files={"command-0/return-code.txt": "137\n", "command-0/stdout.txt": "ok\n"}),
        "infra_error",
        "suspected_oom",
    ),
    "killed-only": (
        H("killed-only", 0.0, agent_files={"command-0/return-code.txt": "0", "command-0/stdout.txt": "x\nKilled\n"}),
        "infra_error",
        "suspected_oom",
    ),
    "nonzero-exit-137": (
        H(
            "nonzero-exit-137",
            0.0,
            exception="NonZeroAgentExitCodeError",
            message="Command failed (exit 137): claude --print\nstdout: None",
        ),
        "infra_error",
        "suspected_oom",
    ),
    # Not a kill: another exit code, and prose that merely mentions killing.
    "exit-1": (
        H("exit-1", 0.0, agent_files={"exit-code.txt": "1", "oracle.txt": "I killed the server. Killed it twice.\n"}),
        "failed",
        None,
    ),
    "no-traces": (H("no-traces", 0.0), "failed", None),
    # Killed but the work passed: the verdict stands.
    "passed-137": (H("passed-137", 1.0, agent_files={"exit-code.txt": "137"}), "passed", None),
    # Another exception decides on its own (a timeout is a timeout).
    "timeout-137": (
        H("timeout-137", 0.0, exception="AgentTimeoutError", agent_files={"exit-code.txt": "137"}),
        "timeout",
        None,
    ),
}


def _stored(store: Path) -> dict[str, tuple[str, str | None, dict]]:
    db = sqlite3.connect(store)
    rows = db.execute(
        "SELECT t.task_id, e.outcome, e.reason, v.json FROM trials t JOIN executions e USING (run_id, trial_id) "
        "JOIN evidence v ON v.run_id = e.run_id AND v.trial_id = e.trial_id AND v.try = e.try"
    ).fetchall()
    db.close()
    return {task: (o, r, json.loads(ev)) for task, o, r, ev in rows}


def test_a_sigkilled_trial_scored_zero_is_a_suspected_oom_inferred_with_its_evidence(
    tmp_path: Path, import_json
) -> None:
    job = write_harbor_job(tmp_path / "job", [t for t, _, _ in TRIALS.values()])
    store = tmp_path / "s.db"
    [done] = import_json(store, str(job["dir"]))
    stored = _stored(store)
    for task, (_, outcome, reason) in TRIALS.items():
        assert stored[task][:2] == (outcome, reason), task
    ev = stored["oracle-137-killed"][2]["inferred_verdict"]
    assert ev["inferred"] is True and ev["reason"] == "suspected_oom" and ev["scored_by_source_as"] == "failed"
    said = {e["file"].rsplit("/agent/", 1)[-1]: e["said"] for e in ev["evidence"]}
    assert said["exit-code.txt"] == "exit code 137"
    assert "812 Killed" in said["oracle.txt"]
    assert all(e["file"].startswith("job/oracle-137-killed__") for e in ev["evidence"])
    assert [e["said"] for e in stored["killed-only"][2]["inferred_verdict"]["evidence"]] == ["Killed"]
    assert "exception_info" in stored["nonzero-exit-137"][2]["inferred_verdict"]["evidence"][0]["file"]
    for task in ("exit-1", "no-traces", "passed-137", "timeout-137"):
        assert "inferred_verdict" not in stored[task][2], task
    # Harbor's own figure is untouched: the source rule still reads the rewards as Harbor did.
    [source] = done["summary"]["sources"]
    assert all(c["agrees"] for c in source["accuracy_checks"])
    assert sum(n for r, n in done["summary"]["rules"].items() if "suspected_oom" in r) == 4
    assert done["summary"]["configurations"][0]["inferred"] == {"suspected_oom": 4}


def test_reports_show_the_score_with_suspected_ooms_as_failures_and_as_infra_errors(
    tmp_path: Path, import_json, report, cli
) -> None:
    job = write_harbor_job(
        tmp_path / "job",
        [
            H("a", 1.0),
            H("a", 1.0),
            H("b", 1.0),
            H("b", 0.0),
            H("c", 0.0, agent_files={"exit-code.txt": "137", "oracle.txt": "Killed\n"}),
            H("c", 0.0, agent_files={"command-0/return-code.txt": "137"}),
        ],
    )
    store = tmp_path / "s.db"
    printed = " ".join(cli("results", "import", str(job["dir"]), "--store", str(store)).stdout.split())
    assert "inferred terminus-2@example/model-h: 2 trial(s) infra_error(suspected_oom)" in printed
    doc = report(store)
    [c] = doc["inferred"]["configs"]
    assert (c["trials"], c["n"], c["passed"]) == (2, 6, 3)
    assert c["score_as_failures"] == pytest.approx(3 / 6)
    assert c["score_as_infra_errors"] == pytest.approx(3 / 4)
    assert c["reason"] == "suspected_oom"
    text = " ".join(cli("report", "--store", str(store)).stdout.split())
    assert "Inferred, not observed" in text
    assert "2 of 6 trials infra_error(suspected_oom), inferred" in text
    assert "as failures 50.0% (3/6), as infra errors 75.0% (3/4)" in text
    md = cli("report", "--store", str(store), "--format", "markdown").stdout
    assert "## Inferred, not observed (imported traces)" in md
    # A run without inferred verdicts has no such section.
    plain = write_harbor_job(tmp_path / "plain", [H("a", 1.0), H("b", 0.0)])
    other = tmp_path / "o.db"
    import_json(other, str(plain["dir"]))
    assert "inferred" not in report(other)


def test_only_the_trials_own_files_count_and_a_long_logs_end_is_read(tmp_path: Path, import_json) -> None:
    """A symlink in the agent directory is not followed (the directory is someone else's); a kill reported at the
    end of a log of megabytes is found."""
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("Killed\n")
    job = write_harbor_job(
        tmp_path / "job",
        [
            H("linked", 0.0, agent_files={"placeholder.md": ""}),
            H("long", 0.0, agent_files={"claude-code.txt": "x" * 80 + "\n"}),
        ],
    )
    [linked] = job["dir"].glob("linked__*/agent")
    (linked / "oracle.txt").symlink_to(outside)
    (linked / "exit-code.txt").symlink_to(outside)
    [long] = job["dir"].glob("long__*/agent/claude-code.txt")
    long.write_text(("step output " * 8 + "\n") * 30000 + "bash: line 1:  4242 Killed                  node agent.js\n")
    store = tmp_path / "s.db"
    import_json(store, str(job["dir"]))
    stored = _stored(store)
    assert stored["linked"][:2] == ("failed", None)
    assert stored["long"][:2] == ("infra_error", "suspected_oom")
    assert "4242 Killed" in stored["long"][2]["inferred_verdict"]["evidence"][0]["said"]
