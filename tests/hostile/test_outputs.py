"""Hostile agents aimed at what a try leaves behind for grading: the self-report, the golden
grader and the output tails (hostile probe findings #6, #7, #10, #12). Each must end as a
plain result of the agent's answer, never crash the sweep or turn into a harness error (which
the score leaves out), and leak nothing."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.hostile.harness import assert_nothing_leaks, reports, requires_sandbox, sweep, write_hostile_task

pytestmark = [pytest.mark.slow, requires_sandbox]


def test_a_deeply_nested_self_report_still_gets_its_answer_verified(tasks_root: Path, tmp_path: Path) -> None:
    # json.loads recursed once per "[" and raised RecursionError: the try became a harness error
    # (left out of the score) and the verifier never ran.
    attack = """python3 -c '
import os
open(os.environ["HEADROOM_AGENT_RESULT"], "w").write("[" * 30000 + "]" * 30000)
'
echo wrong > "$HEADROOM_WORKDIR/answer"
"""
    write_hostile_task(tasks_root, "nested", attack)
    run = sweep(tasks_root, tmp_path)
    assert run.outcomes == [("failed", None)]
    (ev,) = run.evidence
    assert ev["verifier"]["exit_code"] == 0 and ev["reward"] == 0.0
    assert "nested" in ev["agent_result"]["rejected"]["result.json"]
    assert_nothing_leaks(run)


def test_a_golden_answer_that_breaks_the_json_schema_check_is_a_failed_answer(tasks_root: Path, tmp_path: Path) -> None:
    attack = """python3 -c '
import json, os
json.dump({"answer": "[" * 2040 + "]" * 2040}, open(os.environ["HEADROOM_AGENT_RESULT"], "w"))
'
"""
    write_hostile_task(
        tasks_root, "schema", attack, extra_toml='[grader]\njson_schema = {type = "object", required = ["total"]}\n'
    )
    run = sweep(tasks_root, tmp_path)  # the CLI used to exit 1 here, the try abandoned
    assert run.outcomes == [("failed", None)]
    (ev,) = run.evidence
    assert ev["extra"]["grade"]["checks"] == {"json_schema": False}
    assert "nested" in ev["extra"]["grade"]["notes"]["json_schema"]
    resumed = run_cli("resume", "--store", str(run.store), "--format", "none", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert_nothing_leaks(run)


def test_absurd_self_reported_usage_is_not_counted_and_the_totals_stay_finite(tasks_root: Path, tmp_path: Path) -> None:
    attack = """cat > "$HEADROOM_AGENT_RESULT" <<'J'
{"tokens_in": 1e308, "tokens_out": 1.7e308, "cost_usd": 1e308}
J
"""
    for name in ("usage-a", "usage-b"):
        write_hostile_task(tasks_root, name, attack)
    run = sweep(tasks_root, tmp_path)
    assert run.outcomes == [("failed", None)] * 2
    for ev in run.evidence:
        assert set(ev["agent_result"]["rejected"]) == {"tokens_in", "tokens_out", "cost_usd"}
        assert "above the cap" in ev["agent_result"]["rejected"]["cost_usd"]
    s = Store.open_existing(run.store)
    try:
        row = s.db.execute(
            "SELECT COUNT(*) FROM executions WHERE cost_usd IS NOT NULL OR tokens_in IS NOT NULL "
            "OR tokens_out IS NOT NULL"
        ).fetchone()
    finally:
        s.close()
    assert row[0] == 0
    doc = json.loads(reports(run.store, run.run_id)["json"])
    text = json.dumps(doc)
    assert "Infinity" not in text and "NaN" not in text
    assert "0/2 reported" in text and "2/2 reported" not in text
    assert_nothing_leaks(run)


def test_a_secret_printed_across_the_tail_cut_leaves_no_piece(
    tasks_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "KEY" + secrets.token_urlsafe(30)  # 43 characters
    monkeypatch.setenv("HEADROOM_HOSTILE_APIKEY", key)
    # The last 4096 bytes of each output start 20 characters before the key's end.
    attack = """echo "using key $HEADROOM_HOSTILE_APIKEY"; head -c 4074 /dev/zero | tr '\\0' x; echo
echo "using key $HEADROOM_HOSTILE_APIKEY" >&2; head -c 4074 /dev/zero | tr '\\0' y >&2; echo >&2
"""
    write_hostile_task(tasks_root, "straddle", attack)
    run = sweep(tasks_root, tmp_path, "--agent-env", "HEADROOM_HOSTILE_APIKEY")
    assert run.outcomes == [("failed", None)]
    (ev,) = run.evidence
    assert ev["agent"]["stdout_tail"].endswith("x" * 4074 + "\n")  # the tail is still the output's end
    assert len(ev["agent"]["stdout_tail"].encode()) <= 4096
    pieces = [key[i : i + 10] for i in range(len(key) - 9)]
    assert_nothing_leaks(run, more_needles=pieces)
