"""Per-try cost of the Docker backend, against the local backend and a bare container, measured in one run.

    DOCKER_HOST=unix:///path/docker.sock python benchmarks/bench_docker.py \\
        [--image headroom.local/tb2-base:latest] [--trials 20] [--repeats 3] [--concurrency 2]

The workload is bench_overhead.py's: an agent that writes a file with Python and a
verifier that checks it. Three ways, alternated within each repeat so drift hits all
alike, medians of per-try wall time:

* ``local``: trials through the whole engine on the local backend (a cgroup per try);
* ``docker``: the same trials through the engine on the Docker backend (a container
  per try from ``--image``, with headroom's contract: files copied in, agent killed
  before the tests, counters, OOM verdict, removal);
* ``bare docker``: the least a container per try costs through the same API: create,
  start, two execs, remove, nothing else;
* ``bare isolated``: the least a try costs with the verifier isolated as the Docker backend
  isolates it (issue 29), done one call after another: one volume per carried folder, as
  the backend makes them (:func:`orchestrator.contract.carry.roots`: the work dir and
  ``/logs/agent``), the agent's container (create, start, the agent's exec, kill), the
  verifier's container from the same image with those volumes (create, start, the task's
  ``tests/`` uploaded, the verifier's exec, the reward read out), both removed, the volumes
  removed. The upload and the read are what any harness must do to run a task's verifier
  and learn its reward; nothing else of headroom's contract is in it (no agent check, no
  sanitiser, no counters, no task copy for the agent).

Issue 32's target is the ``docker`` way at most 1.3x ``bare isolated``: the same steps, the
verifier's isolation included, without the rest of headroom's contract.

Needs a daemon that has ``--image`` (with python3 and bash); nothing is pulled.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

from orchestrator.backends.base import Backend
from orchestrator.backends.docker import steps
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.local.backend import LocalBackend
from orchestrator.contract import carry
from orchestrator.engine.sweep import prepare, run, start
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.resources import ResourceConfig
from orchestrator.store.sqlite import Store

SOLVE = "python3 -c \"open('$HEADROOM_WORKDIR/out', 'w').write('x' * 1000)\"\n"
TEST = 'if [ -f "$HEADROOM_WORKDIR/out" ]; then echo 1; else echo 0; fi > "$HEADROOM_LOGS_DIR/reward.txt"\n'


def make_task(root: Path) -> None:
    d = root / "tasks" / "write-file"
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "task.toml").write_text(
        "[environment]\ncpus = 1\nmemory_mb = 256\n[agent]\ntimeout_sec = 30\n[verifier]\ntimeout_sec = 30\n"
    )
    (d / "instruction.md").write_text("write a file\n")
    (d / "solution" / "solve.sh").write_text(SOLVE)
    (d / "tests" / "test.sh").write_text(TEST)


def through_engine(root: Path, backend: Backend, image: str | None, trials: int, concurrency: int, tag: str) -> float:
    exp = Experiment(
        tasks_dir=str(root / "tasks"),
        configurations=[ResourceConfig.parse("1x/3x")],
        attempts=trials,
        concurrency=concurrency,
        backend=backend.name,  # type: ignore[arg-type]  # a Backend's name is one of the Literal's values
        image=image,
    )
    store = Store(root / f"bench-{tag}.db")
    run_id, tmap = start(exp, prepare(exp), store, backend)
    t0 = time.perf_counter()
    result = run(store, run_id, exp, tmap, backend)
    elapsed = time.perf_counter() - t0
    store.close()
    assert result.summary.outcomes == {"passed": trials}, result.summary.outcomes
    return elapsed / trials


def bare_docker(client: docker.DockerClient, image: str, trials: int, concurrency: int) -> float:
    api = client.api

    def one(_: int) -> None:
        cid = api.create_container(
            image,
            entrypoint=["sleep", "infinity"],
            command=[],
            labels={"bench": "docker"},
            host_config=api.create_host_config(network_mode="none", mem_limit=768 << 20),
        )["Id"]
        try:
            api.start(cid)
            env = {"HEADROOM_WORKDIR": "/", "HEADROOM_LOGS_DIR": "/tmp"}
            for script in (SOLVE, TEST):
                exec_id = api.exec_create(cid, ["bash", "-c", script], environment=env)["Id"]
                api.exec_start(exec_id)
                assert api.exec_inspect(exec_id)["ExitCode"] == 0
        finally:
            api.remove_container(cid, force=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(trials)))
    return (time.perf_counter() - t0) / trials


def bare_isolated(client: docker.DockerClient, image: str, trials: int, concurrency: int, tests: Path) -> float:
    api = client.api
    work = carry.workdir(api.inspect_image(image)["Config"].get("WorkingDir"))
    carried = carry.roots(work, [])
    upload = steps.tree_archive(dirs=[("/logs", 0o755), ("/logs/verifier", 0o777)], trees=[(tests, "/tests")])

    def run(cid: str, argv: list[str]) -> None:
        env = {"HEADROOM_WORKDIR": work, "HEADROOM_LOGS_DIR": "/logs/verifier"}
        exec_id = api.exec_create(cid, argv, environment=env)["Id"]
        api.exec_start(exec_id)
        assert api.exec_inspect(exec_id)["ExitCode"] == 0

    def one(_: int) -> None:
        volumes = [api.create_volume(labels={"bench": "docker"})["Name"] for _ in carried]
        made: list[str] = []
        try:
            for verifier in (False, True):
                mounts = [
                    docker.types.Mount(path, v, type="volume", no_copy=verifier)
                    for path, v in zip(carried, volumes, strict=True)
                ]
                cid = api.create_container(
                    image,
                    entrypoint=["sleep", "infinity"],
                    command=[],
                    labels={"bench": "docker"},
                    host_config=api.create_host_config(network_mode="none", mem_limit=768 << 20, mounts=mounts),
                )["Id"]
                made.append(cid)
                api.start(cid)
                if verifier:
                    steps.put_archive(api, cid, upload)
                    run(cid, ["bash", "/tests/test.sh"])
                    assert steps.read_small(api, cid, "/logs/verifier/reward.txt", 1024) == (b"1\n", None)
                else:
                    run(cid, ["bash", "-c", SOLVE])
                    api.kill(cid)
        finally:
            for cid in made:
                api.remove_container(cid, force=True)
            for v in volumes:
                api.remove_volume(v, force=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(trials)))
    return (time.perf_counter() - t0) / trials


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default="headroom.local/tb2-base:latest")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=2)
    args = ap.parse_args()
    client = docker.from_env()
    client.images.get(args.image)  # fail early: nothing is pulled
    loc: list[float] = []
    dock: list[float] = []
    bare: list[float] = []
    isolated: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_task(root)
        for r in range(args.repeats):
            local_backend = LocalBackend()
            try:
                loc.append(through_engine(root, local_backend, None, args.trials, args.concurrency, f"local-{r}"))
            finally:
                local_backend.close()
            docker_backend = DockerBackend()
            try:
                dock.append(
                    through_engine(root, docker_backend, args.image, args.trials, args.concurrency, f"docker-{r}")
                )
            finally:
                docker_backend.close()
            bare.append(bare_docker(client, args.image, args.trials, args.concurrency))
            isolated.append(
                bare_isolated(
                    client, args.image, args.trials, args.concurrency, root / "tasks" / "write-file" / "tests"
                )
            )
    client.close()
    ml, md, mb = statistics.median(loc), statistics.median(dock), statistics.median(bare)
    mi = statistics.median(isolated)
    print(
        f"{args.trials} tries per measurement, {args.repeats} repeats, concurrency {args.concurrency}, "
        f"medians of per-try wall time"
    )
    print(f"{'way':<14} {'ms/try':>8}")
    print(f"{'local':<14} {ml * 1000:>8.1f}")
    print(f"{'docker':<14} {md * 1000:>8.1f}")
    print(f"{'bare docker':<14} {mb * 1000:>8.1f}")
    print(f"{'bare isolated':<14} {mi * 1000:>8.1f}")
    print(
        f"docker / local: {md / ml:.2f}   docker / bare docker: {md / mb:.2f}   "
        f"headroom's share of a docker try: {(md - mb) * 1000:.1f} ms"
    )
    print(f"docker / bare isolated: {md / mi:.2f} (issue 32's target: at most 1.30)")


if __name__ == "__main__":
    main()
