"""Root agents that attack the handover between the agent and the verifier, on real containers.

Each test ran as a passing (forged) try before the fix: the agent's processes were ended
with ``sh -c "kill -9 -1"`` inside the container, a process named ``... <defunct>`` passed
for a zombie, and a symlink to the hidden tests was followed by the verifier. Now the
container is stopped and started through the Engine API between the steps, and the
agent's links into verifier-only paths are found through the API and replaced.
Both engines (dockerd and Podman) run each test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.engine.settle import settle
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.experiment import AgentSpec, Experiment, RetryPolicy
from orchestrator.spec.outcome import Outcome

from .conftest import FIXTURES, DockerEnv
from .helpers import copy_task, run_tries

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def backend(engine_env: DockerEnv, engine_host: str) -> Iterator[DockerBackend]:
    b = DockerBackend(DockerOptions(host=engine_host))
    yield b
    b.close()


def _experiment(root: Path, command: str) -> Experiment:
    return Experiment(tasks_dir=str(root), backend="docker", agent=AgentSpec(kind="command", command=command))


#: Finding 11 (d6): `sh` shadowed so the old kill step did nothing, and a reward writer whose command
#: line ends in `<defunct>`, which the old process check skipped as a zombie.
DEFUNCT_WRITER = r"""
echo 41 > /app/answer.txt
printf '#!/usr/bin/dash\ncase "$2" in *"kill -9 -1"*) exit 0;; esac\nexec /usr/bin/dash "$@"\n' > /usr/local/bin/sh
chmod +x /usr/local/bin/sh
setsid python3 -c '
import os, time
while True:
    try:
        if os.path.isdir("/logs/verifier"):
            open("/logs/verifier/reward.txt", "w").write("1")
    except OSError:
        pass
    time.sleep(0.02)
' '<defunct>' >/dev/null 2>&1 < /dev/null &
sleep 1; ps -ef | tail -3
"""


def test_a_process_the_agent_disguised_cannot_write_the_reward(backend: DockerBackend) -> None:
    [(facts, verdict)] = run_tries(backend, _experiment(FIXTURES, DEFUNCT_WRITER), [("tests-hidden", "1x-strict")])
    # The verifier (which waits a second after writing 0) ran with no agent process left: the answer is wrong.
    assert verdict.outcome is Outcome.FAILED, (verdict, facts.infra_detail, facts.verifier)
    assert facts.reward == 0.0
    assert facts.extra.verifier_only_links_removed == 0
    assert (
        facts.extra.handover_s is not None and facts.extra.handover_s > 0
    )  # stop, start, link scan and tests in: recorded per try


#: The keep-alive replaced: were the agent's container started again for the verifier, `sleep` (PID 1, found
#: through PATH) would start a writer first.
FAKE_KEEPALIVE = r"""
echo 41 > /app/answer.txt
mkdir -p /app/bin
for d in /usr/local/bin /app/bin; do
  printf '#!/bin/bash\n( while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; /bin/sleep 0.02; done ) &\nexec /bin/sleep "$@"\n' > $d/sleep
  chmod +x $d/sleep
done
"""


def _graded_in_a_pristine_container(facts, verdict) -> None:  # type: ignore[no-untyped-def]
    """The verifier ran, in its own container from the image, and graded the agent's wrong answer: the agent's
    failure, never an infra error (which would be retried: a re-roll the agent chose)."""
    assert verdict.outcome is Outcome.FAILED and verdict.reason is None, (verdict, facts.agent_fault)
    assert facts.infra_hint is None and facts.setup_error is None and facts.agent_fault is None, facts
    assert facts.verifier is not None and facts.verifier.exit_code == 0 and facts.reward == 0.0, facts.verifier
    assert settle(
        facts, reward_threshold=1.0, retry=RetryPolicy(max_retries=3), finished_before=0, secrets=[]
    ).final  # never retried


def test_a_replaced_keep_alive_never_runs_for_the_verifier(backend: DockerBackend, tmp_path: Path) -> None:
    """The verifier's container is a fresh one from the image: a `sleep` the agent replaced in its own container,
    or planted in a work dir the image puts on PATH (`ENV PATH=/app/bin:...`), is never its keep-alive."""
    root = tmp_path / "tasks"
    copy_task(
        "tests-hidden", root, {"environment/Dockerfile": ("WORKDIR /app", "WORKDIR /app\nENV PATH=/app/bin:$PATH")}
    )
    [(facts, verdict)] = run_tries(
        backend, _experiment(root, FAKE_KEEPALIVE), [("tests-hidden", "1x-strict")], root=root
    )
    _graded_in_a_pristine_container(facts, verdict)


#: The keep-alive replaced so that a restarted container would end: at once (exit 0), before it starts (an
#: interpreter that does not exist), or a while after the restart (under a later step).
KEEPALIVE_EXITS = {
    "exits-at-once": r"#!/bin/sh\nexit 0\n",
    "cannot-start": r"#!/nonexistent/interpreter\n",
    "exits-later": r"#!/bin/sh\n/bin/sleep 1\nexit 0\n",
}


@pytest.mark.parametrize("name", sorted(KEEPALIVE_EXITS))
def test_a_keep_alive_the_agent_broke_does_not_reach_the_verifier(backend: DockerBackend, name: str) -> None:
    """Issue 19 made such a container the agent's failure (it was an infra error, retried); issue 29 keeps the
    agent's container from the verifier altogether: the verifier grades the answer, in a container it started."""
    attack = (
        f"echo 41 > /app/answer.txt\nprintf '{KEEPALIVE_EXITS[name]}' > /usr/local/bin/sleep\n"
        "chmod +x /usr/local/bin/sleep\n"
    )
    [(facts, verdict)] = run_tries(backend, _experiment(FIXTURES, attack), [("tests-hidden", "1x-strict")])
    _graded_in_a_pristine_container(facts, verdict)


#: Finding 3 (docker): links planted while /tests does not exist, to be followed by the verifier.
LINKS = r"""
mkdir -p /app/sub /tmp/hop
ln -s /tests/expected.txt /app/answer.txt                # the hidden answer, read by the verifier
ln -s /tests /app/sub/t                                   # a folder
ln -s ../tests/expected.txt /app/rel                      # relative
ln -s /tmp/hop/next /app/chain; ln -s /tests/x /tmp/hop/next   # through a second link, outside the work dir
mkdir -p /srv/out; ln -s /srv/out /app/out; ln -s /tests/expected.txt /srv/out/answer  # /app/out/answer
ln -s /logs/verifier/reward.txt /logs/agent/reward        # the verifier's own output
ln -s / /app/root                                          # an ancestor: /app/root/tests/... is the tests
echo fine > /app/real; ln -s /app/real /app/ok            # an ordinary link: kept
mkdir -p /tests /logs/verifier; echo x > /tests/planted; echo 1 > /logs/verifier/reward.json   # emptied
"""


def test_links_into_verifier_only_paths_are_removed_and_counted(backend: DockerBackend, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    task = copy_task("tests-hidden", root, {"tests/test.sh": ('= "42"', '= "$(cat /tests/expected.txt)"')})
    (task / "tests" / "expected.txt").write_text("42\n")
    checks = (
        '[ "$(cat /app/ok)" = fine ] && echo OK-LINK-KEPT; [ -L /app/ok ] && echo OK-IS-LINK; '
        "for p in /app/answer.txt /app/sub/t /app/rel /logs/agent/reward /app/root; do "
        '[ -L "$p" ] && echo "STILL-LINK $p"; done; '
        # outside the carried outputs, the verifier's container holds the image's files, not the agent's
        'for p in /tmp/hop/next /srv/out/answer /tests/x; do [ -L "$p" ] && echo "AGENT-FILE $p"; done; '
        "[ -e /tests/planted ] && echo PLANTED; [ -e /logs/verifier/reward.json ] && echo PLANTED; true\n"
    )
    (task / "tests" / "test.sh").write_text((task / "tests" / "test.sh").read_text() + checks)
    [(facts, verdict)] = run_tries(backend, _experiment(root, LINKS), [("tests-hidden", "1x-strict")], root=root)
    assert verdict.outcome is Outcome.FAILED, (verdict, facts.infra_detail, facts.verifier)
    assert facts.reward == 0.0
    # Five links lead into (or above) verifier-only paths from the carried outputs. /app/chain (through
    # /tmp/hop/next) and /app/out/answer (through /srv/out) lead out of them: in the verifier's container,
    # fresh from the image, there is nothing of the agent's at /tmp/hop or /srv/out, so they lead nowhere
    # (kept, dangling). Leftovers in /tests and /logs/verifier never reach the verifier's container.
    assert facts.extra.verifier_only_links_removed == 5, facts.extra.sanitiser
    assert facts.extra.sanitiser is not None and facts.extra.sanitiser.status == "ok"
    assert facts.verifier is not None
    out = facts.verifier.stdout_tail
    assert "OK-LINK-KEPT" in out and "OK-IS-LINK" in out
    assert "STILL-LINK" not in out and "PLANTED" not in out and "AGENT-FILE" not in out


def test_the_oracle_may_link_to_its_solution(backend: DockerBackend, tmp_path: Path) -> None:
    """/solution is verifier-only for other agents; the oracle had it, so its links there stay."""
    root = tmp_path / "tasks"
    copy_task(
        "tests-hidden",
        root,
        {
            "solution/solve.sh": (
                "echo 42 > /app/answer.txt",
                "echo 42 > /app/answer.txt; ln -s /solution/solve.sh /app/s",
            )
        },
    )
    exp = Experiment(tasks_dir=str(root), backend="docker", agent=AgentSpec(kind="oracle"))
    [(facts, verdict)] = run_tries(backend, exp, [("tests-hidden", "1x-strict")], root=root)
    assert verdict.outcome is Outcome.PASSED
    assert facts.extra.verifier_only_links_removed == 0
