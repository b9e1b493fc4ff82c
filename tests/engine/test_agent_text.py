"""The one choke point that makes agent strings valid UTF-8 (orchestrator/agentio/text.py)."""

from __future__ import annotations

import json
import os

from orchestrator.agentio.text import valid_text, valid_tree
from orchestrator.artifacts.names import artifact_name
from orchestrator.engine.settle import settle
from orchestrator.spec.evidence import Evidence, SanitiserReport
from orchestrator.spec.experiment import RetryPolicy
from orchestrator.spec.facts import StepFacts, TrialFacts


def test_lone_surrogates_and_undecodable_bytes_become_visible_escapes() -> None:
    assert valid_text("plain é ✓") == "plain é ✓"
    assert valid_text("a\ud800b") == "a\\ud800b"
    assert valid_text(os.fsdecode(b"x\xffy")) == "x\\xffy"  # as a file name arrives from the file system
    tree = valid_tree({"k\udfff": ["\udc80", {"n": 1, "s": "\ud83d"}]})
    assert tree == {"k\\udfff": ["\\x80", {"n": 1, "s": "\\ud83d"}]}
    json.dumps(tree, ensure_ascii=False).encode("utf-8")  # encodes, as the store needs
    # artifact names share the one function: a lone surrogate in a name once raised there
    assert artifact_name("log\ud800") == "log\\ud800" and artifact_name(os.fsdecode(b"a\xff")) == "a\\xff"


def test_settle_hands_the_store_only_valid_utf8() -> None:
    facts = TrialFacts(
        enforcement="cgroup-v2",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="BestEffort",
        reward=0.0,
        agent=StepFacts(name="agent", exit_code=0, stdout_tail="out \ud800"),
        verifier=StepFacts(name="verifier", exit_code=0),
        agent_result={"answer": "\udcff"},
        extra=Evidence(sanitiser=SanitiserReport(status="crashed", detail=os.fsdecode(b"/app/\xfe"))),
    )
    s = settle(facts, reward_threshold=1.0, retry=RetryPolicy(), finished_before=0, secrets=[])
    stored = json.loads(s.facts.model_dump_json())
    assert stored["agent"]["stdout_tail"] == "out \\ud800" and stored["agent_result"]["answer"] == "\\xff"
    assert stored["extra"]["sanitiser"]["detail"] == "/app/\\xfe"
    assert str(s.verdict) == "failed"
