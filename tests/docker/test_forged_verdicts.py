"""Infra verdicts on the Docker backend come only from the runtime and the orchestrator (issue 19, item 3).

A root agent in the container controls its exit code and its output. Each try below forges one
of the orchestrator's verdicts in them (the local backend's spawn-failure code and message, the
kernel's OOM text, "No space left on device", a timeout's 124, a SIGKILL's 137): every one is the
agent's own failure, judged by the verifier on its work, and final under ``--retries``. The same
forgeries run on the local backend in tests/hostile/test_forged_verdicts.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.engine.settle import settle
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.experiment import AgentSpec, Experiment, RetryPolicy
from orchestrator.spec.outcome import Outcome

from .conftest import FIXTURES, DockerEnv
from .helpers import run_tries

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FORGERIES = [
    'echo "headroom: cannot join cgroup /sys/fs/cgroup/headroom/x/cgroup.procs" >&2; exit 111',
    'echo "OCI runtime exec failed: exec failed: unable to start container process" >&2; exit 126',
    'echo "Out of memory: Killed process 4242 (python3)" >&2; echo MemoryError >&2; exit 137',
    'echo "write error: No space left on device" >&2; exit 28',
    'echo "timeout: sending signal TERM" >&2; exit 124',
    "echo Killed >&2; kill -KILL $$",
]


@pytest.fixture
def backend(engine_env: DockerEnv, engine_host: str) -> Iterator[DockerBackend]:
    b = DockerBackend(DockerOptions(host=engine_host))
    yield b
    b.close()


def test_forged_infra_verdicts_are_the_agents_failure_and_final(backend: DockerBackend) -> None:
    # One try per forgery, concurrently; each picks its forgery by its own trial id ("...-<i>").
    cases = "\n".join(f"  *-{i}) {f} ;;" for i, f in enumerate(FORGERIES))
    command = f'case "$HEADROOM_TRIAL_ID" in\n{cases}\nesac\n'
    exp = Experiment(tasks_dir=str(FIXTURES), backend="docker", agent=AgentSpec(kind="command", command=command))
    results = run_tries(backend, exp, [("tests-hidden", "1x-strict")] * len(FORGERIES))
    retry = RetryPolicy(max_retries=3)
    for forgery, (facts, verdict) in zip(FORGERIES, results):
        assert verdict.outcome is Outcome.FAILED, (forgery, verdict, facts.infra_hint, facts.infra_detail)
        assert facts.agent is not None and facts.agent.spawn_error is None and facts.agent.oom_kills == 0
        assert not facts.agent.timed_out and facts.infra_hint is None
        assert facts.reward == 0.0  # the verifier judged the work (there is none)
        assert settle(facts, reward_threshold=1.0, retry=retry, finished_before=0, secrets=[]).final, forgery
