"""What an agent (or a verifier) writes is parsed, graded, counted and redacted without ever
crashing the engine or bending a result (hostile probe findings #6, #7, #10, #12)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from orchestrator.agentio import safejson
from orchestrator.agentio.redact import REDACTED, TAIL_BYTES, cut_tail, scrub_edges, scrub_sections
from orchestrator.contract.grade import grade
from orchestrator.contract.outputs import USAGE_CAPS, parse_agent_result, parse_reward
from orchestrator.engine.execute import execute
from orchestrator.engine.settle import settle
from orchestrator.engine.sweep import prepare, start
from orchestrator.report import document
from orchestrator.spec.experiment import RetryPolicy
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.grader import GoldenGrader
from orchestrator.spec.outcome import Outcome
from orchestrator.store.sqlite import Store
from tests.engine.test_units import ScriptedBackend, _exp
from tests.taskfactory import write_task

DEEP = "[" * 30000 + "]" * 30000


def _facts(**kw: object) -> TrialFacts:
    base: dict[str, object] = dict(
        enforcement="cgroup-v1",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=1,
        limit_memory_bytes=1,
        qos_class="Guaranteed",
        agent=StepFacts(name="agent", exit_code=0),
        verifier=StepFacts(name="verifier", exit_code=0),
        reward=0.0,
    )
    return TrialFacts(**{**base, **kw})  # type: ignore[arg-type]


def _settle(facts: TrialFacts, grader: GoldenGrader | None = None, secrets: list[str] | None = None):
    return settle(
        facts, reward_threshold=1.0, retry=RetryPolicy(), finished_before=0, secrets=secrets or [], grader=grader
    )


# ---- one bounded JSON loader ------------------------------------------------------------------------


@pytest.mark.parametrize("text", [DEEP, '{"a":' * 5000 + "1" + "}" * 5000, "[" * 100000])
def test_deep_json_is_a_value_error_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ValueError, match="nested"):
        safejson.loads(text)


def test_brackets_inside_strings_do_not_nest_and_sizes_are_bounded() -> None:
    assert safejson.loads(json.dumps({"a": "[" * 10000 + '\\"{'})) == {"a": "[" * 10000 + '\\"{'}
    with pytest.raises(ValueError, match="more than"):
        safejson.loads(" " * (safejson.MAX_BYTES + 1))


def test_a_deep_self_report_or_reward_is_rejected_with_the_reason() -> None:
    got = parse_agent_result(DEEP)
    assert set(got) == {"rejected"} and "nested" in got["rejected"]["result.json"]
    value, err = parse_reward("reward.json", DEEP)
    assert value is None and err is not None and err.startswith("malformed") and "nested" in err


# ---- grading an agent's answer never raises ---------------------------------------------------------

SCHEMA = GoldenGrader(json_schema={"type": "object", "required": ["total"]})


def test_a_deep_answer_fails_the_json_schema_check_with_the_reason() -> None:
    g = grade(SCHEMA, "[" * 2040 + "]" * 2040)
    assert g.reward == 0.0 and g.checks == {"json_schema": False} and "nested" in g.notes["json_schema"]
    assert grade(SCHEMA, '{"total": 3}').reward == 1.0


def test_settle_grades_a_hostile_answer_as_failed_not_as_a_harness_error() -> None:
    s = _settle(_facts(agent_result={"answer": "[" * 2040 + "]" * 2040}), SCHEMA)
    assert s.verdict.outcome is Outcome.FAILED and s.final
    assert s.facts.extra.grade is not None and s.facts.extra.grade.checks == {"json_schema": False}


def test_a_grader_that_raises_on_the_answer_is_a_failed_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(grader: GoldenGrader, answer: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("orchestrator.engine.settle.grade", boom)
    s = _settle(_facts(agent_result={"answer": "x"}), SCHEMA)
    assert s.verdict.outcome is Outcome.FAILED
    assert s.facts.extra.grade is not None and "RecursionError" in (s.facts.extra.grade.notes or {})["grader"]


# ---- absurd self-reported usage ---------------------------------------------------------------------


@pytest.mark.parametrize("key", ["tokens_in", "tokens_out", "cost_usd"])
def test_usage_above_its_cap_is_not_reported_and_the_evidence_says_so(key: str) -> None:
    cap = USAGE_CAPS[key]
    assert parse_agent_result(json.dumps({key: cap}))[key] == cap
    got = parse_agent_result(json.dumps({key: 1e308}))
    assert key not in got and "above the cap" in got["rejected"][key]


def test_report_totals_stay_finite_whatever_the_store_holds(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "a", solve="true\n")
    exp = _exp(tasks_root, attempts=2, configurations=["unbounded"])
    store = Store(tmp_path / "s.db")
    run_id, tmap = start(exp, prepare(exp), store, ScriptedBackend(0))
    execute(store, run_id, exp, tmap, ScriptedBackend(0))  # each try reports cost_usd 0.5
    # A store written before the caps: 1e308 twice sums to inf in SQL and in numpy.
    store.db.execute("UPDATE executions SET cost_usd = 1e308, tokens_in = 1e308 WHERE run_id = ?", (run_id,))
    (cfg,) = document.build(store, run_id).configurations
    cost = cfg.cost
    text = json.dumps(json.loads(cost.model_dump_json()), allow_nan=False)  # raises on inf/NaN
    assert "cost_total_usd" in text
    assert cost.cost_total_usd is None and cost.cost_coverage == "0/2 reported"
    # New results are capped as they are stored.
    facts = _facts(agent_result={"cost_usd": 1e308, "tokens_in": 5})
    from orchestrator.store.sqlite import _usage

    assert _usage(facts.agent_result, "cost_usd") is None and _usage(facts.agent_result, "tokens_in") == 5.0
    store.close()


# ---- a secret across a cut ---------------------------------------------------------------------------

KEY = "sk-live-" + "Q7w" * 11  # 41 characters


def test_a_secret_straddling_the_tail_cut_is_redacted_whole_before_the_cut() -> None:
    out = f"using key {KEY}\n" + "x" * (TAIL_BYTES - 21) + "\n"  # the last TAIL_BYTES start inside the key
    s = _settle(_facts(agent=StepFacts(name="agent", exit_code=0, stdout_tail=out)), secrets=[KEY])
    tail = s.facts.agent.stdout_tail
    assert len(tail.encode()) <= TAIL_BYTES and tail.endswith("x" * 100 + "\n")
    assert not any(KEY[i : i + 4] in tail for i in range(len(KEY) - 3))


@pytest.mark.parametrize("cut", [4, 5, 20, len(KEY) - 1])
def test_a_fragment_left_at_a_cut_edge_is_scrubbed(cut: int) -> None:
    assert cut_tail(KEY[-cut:] + " rest", [KEY]) == REDACTED + " rest"
    assert scrub_edges("start " + KEY[:cut], [KEY], start=False, end=True) == "start " + REDACTED


def test_short_fragments_and_other_text_stay() -> None:
    assert cut_tail(KEY[-3:] + " rest", [KEY]) == KEY[-3:] + " rest"
    assert cut_tail("plain text", [KEY]) == "plain text"


def test_every_section_of_a_log_of_cut_tails_is_scrubbed() -> None:
    log = (
        f"{KEY[-9:]}abc\n===== tail of /logs/agent/stdout.txt =====\n{KEY[-12:]} more\n"
        f"===== tail of /logs/agent/stderr.txt =====\nok\n{KEY[:7]}"
    )
    got = scrub_sections(log, [KEY])
    assert KEY[-9:] not in got and KEY[-12:] not in got and not got.endswith(KEY[:7])
    assert got.count(REDACTED) == 3 and "ok\n" in got and " more\n" in got


def test_finite_checks_hold_for_the_settled_facts() -> None:
    s = _settle(_facts(agent_result=parse_agent_result('{"cost_usd": 1e999, "tokens_in": 3}')))
    assert s.facts.agent_result["tokens_in"] == 3 and "cost_usd" not in s.facts.agent_result
    assert not math.isinf(float(s.facts.agent_result.get("cost_usd", 0)))


def test_integers_too_large_for_a_float_are_refused_not_raised() -> None:
    huge = "1" + "0" * 400
    got = parse_agent_result(f'{{"tokens_in": {huge}, "tokens_out": 7}}')
    assert got["tokens_out"] == 7 and "401 digits" in got["rejected"]["tokens_in"]
    value, err = parse_reward("reward.json", f'{{"reward": {huge}}}')
    assert value is None and err is not None and err.startswith("malformed")
