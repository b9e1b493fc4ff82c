"""The verifier's container (issue 29): fresh from the task's image, it holds only the carried outputs of the agent's.

The plants into the system (a sitecustomize.py, a .pth file, an entry-point plugin, a python3 earlier on PATH, a
replaced shell) are the hostile corpus's ``plant-*`` cases (tests/hostile/corpus.py), run on this backend by
tests/hostile/test_backends_agree.py. Here: what is carried, and what is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.backends.docker.backend import VERDICT_DIR, DockerBackend
from orchestrator.backends.docker.runner import DockerRunner
from orchestrator.contract import sanitiser
from orchestrator.contract.phases import Phase
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.experiment import AgentSpec, Experiment
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.outcome import InfraReason, Outcome

from .conftest import DockerEnv
from .helpers import copy_task, run_tries

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def backend(docker_env: DockerEnv, docker_host: str) -> Iterator[DockerBackend]:
    b = DockerBackend(DockerOptions(host=docker_host, build=True))
    yield b
    b.close()


def _run(backend: DockerBackend, root: Path, command: str):  # type: ignore[no-untyped-def]
    exp = Experiment(tasks_dir=str(root), backend="docker", agent=AgentSpec(kind="command", command=command))
    [(facts, verdict)] = run_tries(backend, exp, [("tests-hidden", "1x-strict")], root=root)
    return facts, verdict


@pytest.mark.parametrize("declared", [True, False])
def test_a_folder_outside_the_work_dir_reaches_the_verifier_only_when_the_task_declares_it(
    backend: DockerBackend, tmp_path: Path, declared: bool
) -> None:
    root = tmp_path / "tasks"
    edits = {"tests/test.sh": ("/app/answer.txt", "/srv/out/answer.txt")}
    if declared:
        edits["task.toml"] = (
            "[verifier]\ntimeout_sec = 60.0",
            '[verifier]\ntimeout_sec = 60.0\noutputs = ["/srv/out"]',
        )
    copy_task("tests-hidden", root, edits)
    facts, verdict = _run(backend, root, "mkdir -p /srv/out && echo 42 > /srv/out/answer.txt")
    assert verdict.outcome is (Outcome.PASSED if declared else Outcome.FAILED), (verdict, facts.verifier)
    assert facts.infra_hint is None and facts.agent_fault is None


def test_an_image_without_a_workdir_works_in_app_which_is_carried(backend: DockerBackend, tmp_path: Path) -> None:
    """A work dir of / would carry the system: an image that sets no WORKDIR gets /app, for both steps."""
    root = tmp_path / "tasks"
    copy_task(
        "tests-hidden",
        root,
        {
            "environment/Dockerfile": ("WORKDIR /app", ""),
            "tests/test.sh": ("/app/answer.txt", '"$HEADROOM_WORKDIR/answer.txt"'),
        },
    )
    facts, verdict = _run(
        backend, root, 'echo 42 > answer.txt && [ "$PWD" = /app ] && [ "$HEADROOM_WORKDIR" = /app ] && touch /tmp/x'
    )
    assert verdict.outcome is Outcome.PASSED, (verdict, facts.agent, facts.verifier)
    assert facts.agent is not None and facts.agent.exit_code == 0


@pytest.mark.parametrize("copy", ["read", "unreadable"])
def test_a_sanitiser_verdict_the_daemon_lost_is_read_from_the_copy_the_script_wrote(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy: str
) -> None:
    """A loaded daemon has closed the sanitiser's exec stream without its verdict (moby/moby#27289, twice in CI's
    suite runs); that cannot be brought about on demand, so the real script runs in the real verifier container
    and its output is then dropped here. The script wrote a copy of its verdict in that container first: the try
    goes on with the script's own counts. Where the copy cannot be read either, the verdict stays lost: the
    runtime's failure (infra), never the agent's."""
    real_run, real_read = DockerRunner.run, DockerRunner.read_file
    dropped: list[int | None] = []
    reads: list[str] = []

    def run(self: DockerRunner, argv: list[str], **kw: Any) -> StepFacts:
        facts = real_run(self, argv, **kw)
        if kw["name"] == Phase.SANITISE:
            dropped.append(facts.exit_code)
            return facts.model_copy(update={"stdout_tail": ""})
        return facts

    def read_file(self: DockerRunner, path: str, limit: int) -> bytes | None:
        if path.startswith(VERDICT_DIR):
            reads.append(path)
            if copy == "unreadable":
                raise docker.errors.APIError("the daemon lost this too")
        return real_read(self, path, limit)

    monkeypatch.setattr(DockerRunner, "run", run)
    monkeypatch.setattr(DockerRunner, "read_file", read_file)
    root = tmp_path / "tasks"
    copy_task("tests-hidden", root)
    # a link into the tests, for the script to remove: its count shows the verdict is the script's own
    facts, verdict = _run(backend, root, "echo 42 > answer.txt && ln -s /tests/test.sh peek")
    assert dropped == [0] and reads == [f"{VERDICT_DIR}/verdict"]
    san = facts.extra.sanitiser
    assert san is not None
    if copy == "read":
        assert verdict.outcome is Outcome.PASSED, (verdict, facts.infra_detail, facts.agent_fault)
        assert san.status == "ok" and san.detail == sanitiser.RECOVERED_DETAIL, san
        assert san.links_removed == 1 and facts.extra.verifier_only_links_removed == 1
    else:
        assert (verdict.outcome, verdict.reason) == (Outcome.INFRA_ERROR, InfraReason.API_ERROR), verdict
        assert facts.agent_fault is None and facts.verifier is None and san.status == "crashed"


@pytest.fixture
def either_backend(engine_env: DockerEnv, engine_host: str) -> Iterator[DockerBackend]:
    """The backend on dockerd, then on Podman (its archive stat names every entry's resolved path as linkTarget)."""
    b = DockerBackend(DockerOptions(host=engine_host, build=True))
    yield b
    b.close()


#: (the image's lines before WORKDIR, the declared outputs, what the refusal names)
IMAGE_LINKS = {
    # a link in the middle of a declared output's path, into the work dir
    "link-on-the-way": ("RUN mkdir -p /app/data && ln -s /app/data /data", '["/data/out"]', "makes /data a link"),
    # the same with the link's target missing from the image (Podman answers 404 with the link's stat)
    "dangling-link": ("RUN ln -s /app/data /data", '["/data/out"]', "makes /data a link"),
    # the declared folder is itself the link (Podman answers for a volume's mount point from the volume)
    "the-folder-itself": (
        "RUN mkdir -p /srv /app/out && ln -s /app/out /srv/out",
        '["/srv/out"]',
        "makes /srv/out a link",
    ),
    # no link at all: the image's own VOLUME inside the work dir is mounted through the agent's files
    "volume-inside": ("VOLUME /app/data", "[]", "declares VOLUME /app/data"),
    # a link into the work dir on the way to the tests
    "tests-through-a-link": ("RUN mkdir -p /app/t && ln -s /app/t /tests", "[]", "makes /tests a link"),
}


@pytest.mark.parametrize("case", list(IMAGE_LINKS))
def test_an_image_that_reaches_a_carried_folder_through_a_link_is_refused_before_the_agent_runs(
    either_backend: DockerBackend, tmp_path: Path, case: str
) -> None:
    """The verifier's container resolves its mount points and uploads after the agent wrote the carried folders,
    following links through them. Tried by hand on dockerd 20.10 with the first case: an agent that re-pointed
    ``/app/data/out`` at ``/usr/lib/python3.11`` had its output volume mounted over the verifier's Python, which
    then could not start. Each way an image can put a path of the verifier's container behind the agent's files is
    refused before the agent starts, naming what the image does; an image without one runs (the other tests)."""
    lines, outputs, named = IMAGE_LINKS[case]
    root = tmp_path / "tasks"
    copy_task(
        "tests-hidden",
        root,
        {
            "environment/Dockerfile": ("WORKDIR /app", f"{lines}\nWORKDIR /app"),
            "task.toml": ("[verifier]\ntimeout_sec = 60.0", f"[verifier]\ntimeout_sec = 60.0\noutputs = {outputs}"),
        },
    )
    attack = (
        "echo 42 > answer.txt; mkdir -p /data/out && echo 'import sys' > /data/out/os.py; "
        "mv /app/data /app/data.old; mkdir -p /app/data && ln -s /usr/lib/python3.11 /app/data/out; touch /tmp/ran"
    )
    facts, verdict = _run(either_backend, root, attack)
    assert (verdict.outcome, verdict.reason) == (Outcome.INFRA_ERROR, InfraReason.SPAWN_FAILED), (verdict, facts)
    assert facts.setup_error is not None and named in facts.setup_error, facts.setup_error
    assert facts.agent is None and facts.verifier is None  # nothing of the agent's ran
