"""External agents on the local backend: a host process acting on the trial's sandbox only through the exec
channel, every exec inside the trial's limits and on record.

The reference agent (examples/agents/reference_agent.py) solves a bundled task, talking to a scripted model
(tests/agents/fake_model.py stands in for a model provider, which cannot run here) through the real gateway.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from orchestrator.artifacts import execlog, names, reader, trajectory
from tests.agents.fake_model import FakeModel, Reply
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
REFERENCE = REPO / "examples" / "agents" / "reference_agent.py"
UPSTREAM_KEY = "sk-upstream-ext-0123456789abcdefghij"

# What a model that knows the answer would ask for: a segmented sieve over the task's range (seeded per trial).
SIEVE = r"""python3 - <<'PY'
import json, math, os, random
r = random.Random(f"prime-count:{int(os.environ['HEADROOM_SEED'])}")
lo = r.randrange(20_000_000, 60_000_000); hi = lo + r.randrange(60_000, 90_000)
lim = math.isqrt(hi) + 1
small = bytearray([1]) * (lim + 1); small[0:2] = b"\0\0"
for i in range(2, math.isqrt(lim) + 1):
    if small[i]:
        small[i * i::i] = bytearray(len(small[i * i::i]))
seg = bytearray([1]) * (hi - lo)
for p in range(2, lim + 1):
    if small[p]:
        s = max(p * p, (lo + p - 1) // p * p)
        seg[s - lo::p] = bytearray(len(seg[s - lo::p]))
json.dump({"lo": lo, "hi": hi, "count": sum(seg)}, open("primes.json", "w"))
print("wrote primes.json")
PY"""
# A command that must fail in the environment: the task's environment has no network.
NET_PROBE = (
    "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), timeout=3)' && echo ONLINE || echo OFFLINE"
)


def sweep(tmp_path: Path, experiment: dict, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "exp.yaml"
    spec.write_text(yaml.safe_dump(experiment))
    return run_cli(
        "sweep",
        "--experiment",
        str(spec),
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
        "--no-canary",
        env=env,
        cwd=REPO,
    )


def artifacts(db: sqlite3.Connection, trial_id: str) -> dict[str, bytes]:
    run_id = db.execute("SELECT run_id FROM runs").fetchone()[0]
    return {a.name: reader.read(db, a.sha256) for a in reader.list_artifacts(db, run_id, trial_id, 0) if a.sha256}


def solve_with_the_reference_agent(
    tmp_path: Path, extra: dict | None = None, env: dict[str, str] | None = None
) -> None:
    """A sweep of the bundled prime-count task by the reference agent against the scripted model, checked
    end to end (shared by the Docker backend's test)."""
    script = [
        Reply("checking the environment", tool_calls=[{"name": "bash", "arguments": {"cmd": NET_PROBE}}]),
        Reply("counting", tool_calls=[{"name": "bash", "arguments": {"cmd": SIEVE}}]),
        Reply("primes.json is written"),
    ]
    with FakeModel(script, openai_key=UPSTREAM_KEY) as fake:
        res = sweep(
            tmp_path,
            {
                "tasks_dir": str(TASKS),
                "tasks": ["prime-count"],
                "configurations": ["3"],
                "attempts": 2,
                "concurrency": 1,
                "agent": {"kind": "external", "command": f"python3 {REFERENCE} --model fake-model-1"},
                "gateway": {
                    "openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP_OPENAI"},
                    "prices": {"fake-model-1": {"input": 3.0, "output": 15.0}},
                },
                **(extra or {}),
            },
            env={"UP_OPENAI": UPSTREAM_KEY, **(env or {})},
        )
        assert res.returncode == 0, res.stderr
        assert len(fake.seen) == 6  # 3 calls per try, all through the gateway with the upstream's key
    db = sqlite3.connect(tmp_path / "h.db")
    db.row_factory = sqlite3.Row
    tries = db.execute("SELECT * FROM executions ORDER BY trial_id").fetchall()
    assert [t["outcome"] for t in tries] == ["passed", "passed"]
    for t in tries:
        assert t["usage_source"] == "gateway" and t["tokens_in"] > 0 and t["cost_usd"] > 0
        kept = artifacts(db, t["trial_id"])
        records = [r for r in execlog.parse(kept[names.EXEC_LOG]) if isinstance(r, execlog.ExecRecord)]
        assert [r.command[-1] for r in records] == [NET_PROBE, SIEVE]  # type: ignore[index]
        assert all(r.exit_code == 0 and r.duration_s is not None for r in records)
        # The environment stayed offline while the agent reached its model.
        traj = trajectory.parse(kept[f"{names.LOGS_PREFIX}/trajectory.json"])
        assert traj is not None and traj.format.startswith("ATIF")
        observed = [o.content for s in traj.steps for o in s.observations]
        assert "OFFLINE" in observed[0] and "wrote primes.json" in observed[1]
        assert names.MODEL_CALLS in kept and b"primes.json is written" in kept[names.AGENT_STDOUT]
    db.close()
    for f in tmp_path.glob("h.db*"):
        assert UPSTREAM_KEY.encode() not in f.read_bytes()


@pytest.mark.slow
def test_the_reference_agent_solves_a_bundled_task_through_the_gateway_and_the_exec_channel(tmp_path: Path) -> None:
    solve_with_the_reference_agent(tmp_path)


AGENT = r"""
set -u
$HEADROOM_EXEC -- bash -c 'echo "$HEADROOM_SEED" > seed; pwd'
echo "seed-rc=$?"
printf 'from-stdin' | $HEADROOM_EXEC -i --cwd /tmp --env GREETING=hi -- bash -c 'cat; echo " $GREETING $(pwd)"'
$HEADROOM_EXEC --timeout 1 -- sleep 30; echo "timeout-rc=$?"
$HEADROOM_EXEC -- bash -c 'exit 7'; echo "exit-rc=$?"
$HEADROOM_EXEC -- bash -c 'sleep 300 >/dev/null 2>&1 &'; $HEADROOM_EXEC -- bash -c 'pgrep -c sleep'
$HEADROOM_EXEC -- bash -c 'env' | grep -c -e OPENAI -e HEADROOM_MODEL -e HEADROOM_EXEC; true
$HEADROOM_EXEC -- cat /proc/self/cgroup
cat /proc/self/cgroup
python3 -c 'import headroom_exec as hx; r = hx.run("head -c 100000 /dev/zero"); print("api", r.exit_code, r.stdout_bytes)'
$HEADROOM_EXEC -- touch out
"""


@pytest.mark.cgroup
def test_the_exec_channel_runs_in_the_trials_sandbox_and_cgroup_with_the_options_given(
    tmp_path: Path, tasks_root: Path
) -> None:
    write_task(tasks_root, "ok", solve="true\n")
    res = sweep(
        tmp_path,
        {
            "tasks_dir": str(tasks_root),
            "tasks": ["ok"],
            "configurations": ["1"],
            "attempts": 1,
            "agent": {"kind": "external", "command": AGENT},
        },
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    (trial_id,) = db.execute("SELECT trial_id FROM executions").fetchone()
    kept = artifacts(db, trial_id)
    out = kept[names.AGENT_STDOUT].decode()
    assert "/app\nseed-rc=0" in out
    assert "from-stdin hi /tmp" in out
    assert "timeout-rc=124" in out and "exit-rc=7" in out
    lines = out.splitlines()
    assert lines[lines.index("exit-rc=7") + 1] == "1"  # a background process of one exec is there for the next
    assert lines[lines.index("exit-rc=7") + 2] == "0"  # no gateway variable, no channel, in the environment
    exec_cgroup, host_cgroup = lines[lines.index("exit-rc=7") + 3], lines[lines.index("exit-rc=7") + 4]
    assert exec_cgroup != host_cgroup  # the exec ran in the trial's cgroup (seen from its own namespace), the agent not
    assert "api 0 100000" in out
    records = [r for r in execlog.parse(kept[names.EXEC_LOG]) if isinstance(r, execlog.ExecRecord)]
    assert len(records) == 10
    timed = [r for r in records if r.timed_out]
    assert len(timed) == 1 and timed[0].command == ["sleep", "30"] and timed[0].exit_code is None
    assert records[-2].stdout_bytes == 100000
    assert db.execute("SELECT outcome FROM executions").fetchone()[0] == "passed"
    db.close()
