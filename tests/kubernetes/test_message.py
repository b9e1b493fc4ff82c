"""The runner's termination message as the backend reads it: no agent-written text can become a key
(hostile probe finding #1), and a message that repeats a key is not believed."""

from __future__ import annotations

import base64

import pytest

from orchestrator.backends.kubernetes import message

HEAD = "v=1\nagent_exit=0\nagent_cs=5\n"
TAIL = "verifier_exit=0\nreward_file=reward.txt\nreward_size=2\nreward_b64=" + base64.b64encode(b"0\n").decode() + "\n"
BREAKS = ["\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x1f\x0b"]


@pytest.mark.parametrize("brk", BREAKS)
def test_no_line_break_but_newline_splits_a_value(brk: str) -> None:
    # the runner's fallback without base64: the text on one line, as written
    forged = brk.join(['{"tokens_in": 1}', "reward_file=reward.txt", "reward_size=2", "reward=1", "reward_b64=MQ=="])
    report = message.parse(HEAD + f"agent_result={forged}\n" + TAIL)
    assert report is not None and not report.duplicates
    assert report.reward() == (0.0, None)


def test_a_repeated_key_makes_the_reward_malformed_and_the_self_report_void() -> None:
    forged = HEAD + "agent_result_b64=" + base64.b64encode(b'{"tokens_in": 9}').decode() + "\nreward=1\n"
    report = message.parse(forged + "reward_b64=MQ==\nreward_file=reward.txt\nreward_size=2\n" + TAIL)
    assert report is not None
    value, err = report.reward()
    assert value is None and err is not None and err.startswith("malformed") and "reward_file" in err
    assert report.agent_result() == {}
    assert "reward_b64" in (report.evidence().duplicate_keys or [])


def test_base64_contents_round_trip_and_bad_base64_is_malformed() -> None:
    result = '{"answer": "a\\nb", "model": "m\u2028"}'
    ok = message.parse(HEAD + "agent_result_b64=" + base64.b64encode(result.encode()).decode() + "\n" + TAIL)
    assert ok is not None and ok.agent_result() == {"answer": "a\nb", "model": "m\u2028"}
    bad = message.parse(TAIL.replace("reward_b64=MAo=", "reward_b64=M!o=") + "v=1\n")
    assert bad is not None and bad.reward()[0] is None and bad.reward()[1].startswith("malformed")


def test_a_deep_self_report_in_the_message_is_rejected_not_raised() -> None:
    deep = base64.b64encode(b"[" * 1000 + b"]" * 1000).decode()
    report = message.parse(HEAD + f"agent_result_b64={deep}\n" + TAIL)
    assert report is not None and "nested" in report.agent_result()["rejected"]["result.json"]


def test_the_links_removed_reach_the_evidence() -> None:
    report = message.parse(HEAD + "verifier_only_links_removed=2\nsanitise=exhausted\n" + TAIL)
    assert report is not None
    assert report.evidence().verifier_only_links_removed == "2"
    assert report.evidence().sanitise == "exhausted"
