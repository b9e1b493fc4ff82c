"""The hostile corpus (tests/hostile/corpus.py) on every backend: the same outcome and reason for each case.

Each backend's test runs every selected case in one sweep (one environment per session: the
local sandbox, the session's private dockerd, the session's real node) and compares what it
got with the one table of expected verdicts, :func:`corpus.expected`; so a case that ends
differently on two backends fails on at least one of them. ``HEADROOM_HOSTILE_CASES=fast``
runs one case per class.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import yaml

from orchestrator.store.sqlite import Store
from tests.hostile import corpus
from tests.hostile.harness import assert_nothing_leaks, requires_sandbox, sweep

pytestmark = [pytest.mark.slow]

#: One image for the container backends: the Docker tests' base image with the work dir of Terminal-Bench 2 images.
CORPUS_IMAGE = "headroom.local/hostile-corpus:1"


def with_details(store: Path) -> dict[str, tuple[tuple[str, str | None], str]]:
    """task -> (verdict, what the evidence says about it: infra detail, sanitiser, agent fault)."""
    s = Store.open_existing(store)
    try:
        run_id = s.run().run_id
        tasks = {t.trial_id: t.task_id for t in s.planned(run_id)}
        rows = s.db.execute(
            "SELECT trial_id, outcome, reason FROM executions WHERE run_id=? AND final=1", (run_id,)
        ).fetchall()
        out = {}
        for r in rows:
            evs = s.evidence(run_id, r["trial_id"])
            ev = evs[-1] if evs else {}
            detail = "; ".join(
                str(x)
                for x in (
                    ev.get("infra_detail"),
                    ev.get("setup_error"),
                    ev.get("agent_fault"),
                    (ev.get("extra") or {}).get("sanitiser"),
                )
                if x
            )
            out[tasks[r["trial_id"]]] = ((r["outcome"], r["reason"]), detail)
        return out
    finally:
        s.close()


def check(store: Path, cases: list[corpus.Case]) -> None:
    details = with_details(store)
    got = {task: verdict for task, (verdict, _) in details.items()}
    want = corpus.expected(cases)
    table = "\n".join(f"{n:<44} {got.get(n)!s:<34} {want[n]}  {details.get(n, (None, ''))[1][:300]}" for n in want)
    assert got == want, "case / got / expected / evidence\n" + table
    assert not any(o == "passed" for o, _ in got.values())


@requires_sandbox
def test_the_corpus_on_the_local_backend(tmp_path: Path) -> None:
    cases = corpus.selected()
    root = tmp_path / "tasks"
    corpus.write_corpus(root, cases, tests_at="/task/tests")
    run = sweep(root, tmp_path, "--concurrency", "2", timeout=900)
    check(run.store, cases)
    assert_nothing_leaks(run)


def corpus_image(docker_env) -> str:  # type: ignore[no-untyped-def]
    """Built once per daemon: the base image with WORKDIR /app (as Terminal-Bench 2 images have)."""
    try:
        docker_env.client.images.get(CORPUS_IMAGE)
        return CORPUS_IMAGE
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound; built below
        pass
    dockerfile = f"FROM {docker_env.base_image}\nWORKDIR /app\n".encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        ti = tarfile.TarInfo("Dockerfile")
        ti.size = len(dockerfile)
        tar.addfile(ti, io.BytesIO(dockerfile))
    buf.seek(0)
    docker_env.client.images.build(fileobj=buf, custom_context=True, tag=CORPUS_IMAGE, network_mode="none")
    return CORPUS_IMAGE


@pytest.mark.docker
def test_the_corpus_on_the_docker_backend(docker_env, docker_host: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cases = corpus.selected()
    root = tmp_path / "tasks"
    corpus.write_corpus(root, cases, tests_at="/tests")
    exp = tmp_path / "docker.yaml"
    exp.write_text(yaml.safe_dump({"image": corpus_image(docker_env)}))
    run = sweep(root, tmp_path, "--backend", "docker", "--experiment", str(exp), "--concurrency", "2", timeout=900)
    check(run.store, cases)
    assert_nothing_leaks(run, isolation="container")


# Pods on the real node: tests/cluster/test_realnode_hostile.py (it needs the cluster's fixtures).
