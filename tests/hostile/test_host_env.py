"""A task's env tables act only in its own programs, never in a process headroom starts on the host.

Before a step's program runs, headroom starts helpers on the host with the step's environment: the cgroup
wrapper, the seccomp opener, ``setpriv``, ``bwrap`` (root when headroom is). The loader's variables and a
shell's start-up ones make those run the task's code (``isolation.hostenv``). The local steps' path kept them
out (``test_step_wrapper.py``); an external agent's exec sandbox, the host agent's own sandbox and the preflight
check in it gave the task's ``[environment.env]`` to their helpers as is. One filter now serves every one of
them, and these tests go through each.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orchestrator.artifacts import names, reader
from orchestrator.isolation import hostenv, process
from tests.hostile.harness import requires_sandbox, sweep, write_hostile_task

#: Every class the filter must keep from the host's helpers, by name (a variant of each).
WORKLOAD_ONLY = (
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_DEBUG",
    "LD_BIND_NOW",
    "GCONV_PATH",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "BASH_FUNC_echo%%",
    "BASH_FUNC_ls()",
    "a-b",
    "x.y",
    "1X",
)


def test_the_filter_keeps_every_class_from_the_host_and_nothing_else() -> None:
    env = {k: "v" for k in WORKLOAD_ONLY} | {"PATH": "/usr/bin", "HOME": "/h", "LDFLAGS": "-x", "MY_LD_X": "1"}
    host, workload = hostenv.split(env)
    assert set(workload) == set(WORKLOAD_ONLY)
    assert host == {"PATH": "/usr/bin", "HOME": "/h", "LDFLAGS": "-x", "MY_LD_X": "1"}
    assert hostenv.env_argv({}) == []
    assert hostenv.env_argv({"LD_X": "a b"}) == [hostenv.ENV, "--", "LD_X=a b"]


def test_a_step_without_a_cgroup_gets_them_and_no_helper_in_front_of_it_does(tmp_path: Path) -> None:
    """``run_step`` without a cgroup puts helpers in front of the workload too (the fd-3 opener, RLIMIT_DATA's
    interpreter): the loader of none of them may act on a task's variables; the workload gets them unchanged."""
    ld_out = tmp_path / "ld"
    env = {
        "PATH": "/usr/bin:/bin",
        "LD_DEBUG": "files",
        "LD_DEBUG_OUTPUT": str(ld_out),
        "BASH_FUNC_f%%": "() { echo f; }",
    }
    argv = ["/usr/bin/printenv", "LD_DEBUG", "BASH_FUNC_f%%"]
    for limits, fd3 in ((process.Limits(None), str(tmp_path / "f3")), (process.Limits(1 << 30), None)):
        (tmp_path / "f3").write_text("x")
        for f in tmp_path.glob("ld.*"):
            f.unlink()
        facts, _ = process.run_step(
            "step", argv, env=env, cwd=tmp_path, logs_dir=tmp_path, timeout_s=30, cgroup=None, limits=limits, fd3=fd3
        )
        assert facts.exit_code == 0, facts
        assert facts.stdout_tail.splitlines() == ["files", "() { echo f; }"]
        logs = sorted(tmp_path.glob("ld.*"))
        # one loader log: the workload's (printenv's own, and the `env` that set the variables for it writes none)
        programs = [p.read_text() for p in logs]
        assert len(logs) == 1 and "printenv" in programs[0], [t[:300] for t in programs]


# Each writes what it got to a file of the agent's logs dir (kept as artifacts): the loader's statistics, which
# go to stdout where LD_DEBUG_OUTPUT cannot be opened (inside a sandbox), fill the output's tail; printf, as the
# task's exported ``echo`` function is there too.
AGENT = """\
$HEADROOM_EXEC -- bash -c 'printf "%s\\n" "$LD_DEBUG" > "$HEADROOM_LOGS_DIR/exec-saw"; printf wrong > answer'
printf '%s\n' "$LD_DEBUG" > "$HEADROOM_LOGS_DIR/agent-saw"
"""


@pytest.mark.slow
@requires_sandbox
def test_a_tasks_env_tables_reach_no_host_process_of_an_external_agents_try(tasks_root: Path, tmp_path: Path) -> None:
    """End to end on the local backend: the preflight check in the agent's sandbox, the host agent's sandbox (its
    wrapper, seccomp opener and bwrap) and the trial's exec sandbox (its cgroup wrapper, setpriv, bwrap) all start
    with a task whose ``[environment.env]`` names the loader's and a shell's start-up variables. Each host-side
    loader would write ``LD_DEBUG_OUTPUT.<pid>`` in this host folder (which no sandbox shows); none may. The
    agent's program and each exec still get the variables."""
    ran = tmp_path / "host-marker"
    ld_out = tmp_path / "ld-debug"
    write_hostile_task(
        tasks_root,
        "env-tables",
        "true\n",
        extra_toml=(
            "[environment.env]\n"
            f"LD_DEBUG = 'statistics'\nLD_DEBUG_OUTPUT = '{ld_out}'\n"
            f"BASH_ENV = '$(echo BASH_ENV >> {ran})'\n"
            f"'BASH_FUNC_command%%' = '() {{ echo command >> {ran}; }}'\n"
            f"'BASH_FUNC_echo%%' = '() {{ builtin echo echo >> {ran}; }}'\n"
        ),
    )
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "run.sh").write_text(AGENT)
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"agent:\n  kind: external\n  path: {agent}\n")
    run = sweep(
        tasks_root, tmp_path, "--agent", "external", "--experiment", str(exp), agent_command="bash run.sh", timeout=300
    )
    assert run.outcomes == [("failed", None)], run.outcomes
    assert not ran.exists(), ran.read_text()
    logs = sorted(tmp_path.glob("ld-debug*"))
    assert not logs, [(p.name, p.read_text()[:400]) for p in logs]
    db = sqlite3.connect(run.store)
    try:
        (trial_id,) = db.execute("SELECT trial_id FROM executions").fetchone()
        kept = {
            a.name: reader.read(db, a.sha256) for a in reader.list_artifacts(db, run.run_id, trial_id, 0) if a.sha256
        }
    finally:
        db.close()
    saw = {who: kept.get(f"{names.LOGS_PREFIX}/{who}-saw") for who in ("agent", "exec")}
    assert saw == {"agent": b"statistics\n", "exec": b"statistics\n"}, sorted(kept)
