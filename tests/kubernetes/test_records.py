"""A try's full record on Pods, through the real runner (dash, a PID namespace, a memory cgroup; see
runner_harness.py): the runner's tar at the end of the container log, checked against the termination
message, unpacked and stored by a real SQLite artifact sink under the names the other backends use."""

from __future__ import annotations

import base64
import io
import shutil
import sqlite3
import tarfile
from pathlib import Path

import pytest

from orchestrator.artifacts import reader
from orchestrator.artifacts.sink import StoreSink, register, unregister
from orchestrator.backends.kubernetes import records
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.launch import Launch
from orchestrator.store.sqlite import Store
from orchestrator.tasks.files import bundle
from orchestrator.tasks.loader import load_tasks
from tests.taskfactory import write_task

from .runner_harness import RunResult, cgroup_usable, run_pod
from .test_runner import judged

pytestmark = [pytest.mark.cgroup, pytest.mark.skipif(cgroup_usable() is not None, reason=str(cgroup_usable()))]

SECRET = "Zq7-Wk9-Hh2-Pp4-Jj6-Tt8-Vv1-Ff3"
#: The agent's stdout: far beyond the 4 KiB of the termination message and the 2 KiB log tail.
BIG = 'i=0; while [ $i -lt 3000 ]; do echo "line $i of the agent"; i=$((i+1)); done'
AGENT = (
    BIG + '; echo "to stderr" >&2; '
    'printf \'{"schema_version": "ATIF-v1.2", "steps": []}\' > "$HEADROOM_LOGS_DIR/trajectory.json"; '
    'mkdir -p "$HEADROOM_LOGS_DIR/sub"; echo deep > "$HEADROOM_LOGS_DIR/sub/notes.txt"; '
    'ln -s /etc/passwd "$HEADROOM_LOGS_DIR/link"; touch "$HEADROOM_WORKDIR/out"'
)


def _run(tmp: Path, agent: dict[str, object], **kw: object) -> tuple[Launch, RunResult]:
    tasks = tmp / "tasks"
    write_task(
        tasks,
        "rec",
        solve="exit 0\n",
        test='echo "verifier says hi"; [ -f "$HEADROOM_WORKDIR/out" ] && echo 1 > "$HEADROOM_LOGS_DIR/reward.txt"'
        ' || echo 0 > "$HEADROOM_LOGS_DIR/reward.txt"\n',
    )
    exp = Experiment(tasks_dir=str(tasks), tasks=["rec"], configurations=["unbounded"], attempts=1, agent=agent)
    loaded = load_tasks(tasks, ["rec"])
    launch = build_launch("run-rec", plan(exp, loaded)[0], 0, loaded[0], exp)
    res = run_pod(tmp, launch, bundle("rec", loaded[0].path, loaded[0].digest), **kw)  # type: ignore[arg-type]
    return launch, res


def _kept(
    tmp: Path, launch: Launch, res: RunResult, secrets: tuple[str, ...] = ()
) -> tuple[records.Record, dict[str, tuple[reader.ArtifactInfo, bytes]]]:
    assert res.report is not None
    want = records.expected(res.report)
    assert isinstance(want, tuple), res.message
    data = records.from_log(res.stdout.encode(), *want)
    assert data is not None
    path = tmp / "h.db"
    Store(path).close()
    sink = StoreSink(path, secrets=secrets)
    register(launch.run_id, sink)
    try:
        rec = records.keep(launch, data, res.report.fields.get("records_truncated") == "1")
    finally:
        unregister(launch.run_id)
        sink.close()
    db = sqlite3.connect(path)
    try:
        arts = {
            a.name: (a, reader.read(db, a.sha256) if a.sha256 else b"")
            for a in reader.list_artifacts(db, launch.run_id, launch.trial_id, launch.try_index)
        }
    finally:
        db.close()
    return rec, arts


def test_the_complete_output_and_logs_dir_reach_the_artifacts(tmp_path: Path) -> None:
    launch, res = _run(tmp_path, {"kind": "command", "command": AGENT})
    assert judged(res)[0].value == "passed"  # type: ignore[attr-defined]
    assert res.report is not None and int(res.report.fields["records_bytes"]) > 4096
    if shutil.which("sha256sum"):
        assert len(res.report.fields["records_sha256"]) == 64
    rec, arts = _kept(tmp_path, launch, res)
    assert rec.status == "kept" and not rec.truncated, rec
    out = arts["agent/stdout"][1].decode()
    assert out.count("\n") == 3000 and out.startswith("line 0 of") and "line 2999 of the agent" in out
    assert arts["agent/stderr"][1] == b"to stderr\n"
    assert arts["logs/trajectory.json"][1].startswith(b'{"schema_version": "ATIF-v1.2"')
    assert arts["logs/sub/notes.txt"][1] == b"deep\n"
    assert "logs/stdout.txt" not in arts  # the step's output is agent/stdout, as on local and Docker
    assert arts["verifier/stdout"][1] == b"verifier says hi\n"
    link = arts.get("logs/link")  # a link out of the tree is refused by tarfile's data filter, never followed
    assert link is None or link[0].status == "skipped"
    assert b"root:" not in b"".join(v for _, v in arts.values())


def test_a_block_the_agent_printed_cannot_stand_in_for_the_runners(tmp_path: Path) -> None:
    launch, res = _run(tmp_path, {"kind": "command", "command": AGENT})
    assert res.report is not None
    size, sha = records.expected(res.report)  # type: ignore[misc]
    forged_tar = io.BytesIO()
    with tarfile.open(fileobj=forged_tar, mode="w") as tar:
        info = tarfile.TarInfo("verifier/stdout.txt")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"forged"))
    forged = forged_tar.getvalue()
    block = (
        f"===== headroom records {len(forged)} =====\n{base64.b64encode(forged).decode()}\n"
        "===== end of headroom records =====\n"
    )
    # Printed into the log by an agent: it can only come before the runner's own block.
    assert records.from_log((block + res.stdout).encode(), size, sha) == records.from_log(
        res.stdout.encode(), size, sha
    )
    # Alone, it matches neither the runner's size nor its digest.
    assert records.from_log(block.encode(), size, sha) is None
    assert records.from_log(block.encode(), len(forged), "0" * 64) is None


def test_the_cap_cuts_the_record_and_is_recorded(tmp_path: Path) -> None:
    launch, res = _run(tmp_path, {"kind": "command", "command": AGENT}, extra_env={"HR_RECORDS_MAX": "20000"})
    assert res.report is not None
    assert int(res.report.fields["records_bytes"]) < 3 * 20000  # the content is cut, file by file, at the cap
    rec, arts = _kept(tmp_path, launch, res)
    assert rec.status == "kept", rec
    info, out = arts["agent/stdout"]  # ~60 KB of output: cut, as the per-try cap cuts, with its size
    full = sum(len(f"line {i} of the agent\n") for i in range(3000))
    assert info.status == "truncated" and info.original_size == full and 0 < len(out) <= 20000
    assert out.startswith(b"line 0 of the agent\n")
    # What comes once the cap is spent is named with its size, never silently gone.
    later = [a for a, _ in arts.values() if a.status == "dropped"]
    assert later and all(a.original_size and a.size == 0 for a in later), [a.name for a in later]


#: What a hostile agent leaves in its logs dir (the classes local keeps, cuts or skips with a reason).
HOSTILE_LOGS = (
    'L="$HEADROOM_LOGS_DIR"; touch "$HEADROOM_WORKDIR/out"; '
    'echo "key $HEADROOM_TEST_SECRET" > "$L/trajectory.json"; '
    'truncate -s 10G "$L/sparse.bin"; '  # 10 GB of holes: costs nothing on disk, everything to read
    'ln -s /etc/passwd "$L/host-file"; ln -s ../../.. "$L/up"; '
    'mkfifo "$L/fifo"; '
    'python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$L/sock"; '
    "printf x > \"$L/$(printf 'evil\\033[31m\\tname')\"; "
    'i=0; while [ $i -lt 50 ]; do echo "$i" > "$L/many-$i"; i=$((i+1)); done'
)


@pytest.mark.parametrize("with_secret", [False, True], ids=["plain", "with --agent-env secret"])
def test_a_hostile_logs_dir_is_kept_cut_and_skipped_as_local_keeps_it_in_bounded_time(
    tmp_path: Path, with_secret: bool
) -> None:
    env = {"HEADROOM_TEST_SECRET": SECRET, "HR_SECRET_NAMES": "HEADROOM_TEST_SECRET"} if with_secret else {}
    agent = {"kind": "command", "command": HOSTILE_LOGS, "env_passthrough": ["HEADROOM_TEST_SECRET"]}
    # The pod's own deadline stands well above this; the runner used to read the sparse file to its end.
    launch, res = _run(tmp_path, agent, extra_env=env, timeout=240)
    assert judged(res)[0].value == "passed", res.message  # type: ignore[attr-defined]
    rec, arts = _kept(tmp_path, launch, res, secrets=(SECRET,) if with_secret else ())
    assert rec.status == "kept", rec
    by = {name: a for name, (a, _) in arts.items()}
    assert by["logs/sparse.bin"].status == "truncated" and by["logs/sparse.bin"].original_size == 10 * 1024**3
    assert by["logs/host-file"].status == "skipped" and by["logs/host-file"].detail == (
        "a symlink (not followed) to /etc/passwd"
    )
    assert by["logs/up"].status == "skipped" and "symlink (not followed)" in (by["logs/up"].detail or "")
    assert by["logs/fifo"].detail == "a FIFO (not read)" and by["logs/fifo"].status == "skipped"
    assert by["logs/sock"].detail == "a socket (not read)" and by["logs/sock"].status == "skipped"
    assert sum(1 for n in by if n.startswith("logs/many-")) == 50
    assert [n for n in by if "name" in n and "evil" in n]  # a hostile name is kept, as a valid name
    assert b"root:" not in b"".join(v for _, v in arts.values())
    if with_secret:  # redacted in the pod, before the log: the host's sink had nothing left to redact
        want = records.expected(res.report)  # type: ignore[arg-type]
        assert isinstance(want, tuple)
        data = records.from_log(res.stdout.encode(), *want)
        assert data is not None and SECRET.encode() not in data and b"key [REDACTED]" in data


def test_secrets_are_redacted_before_they_reach_the_container_log(tmp_path: Path) -> None:
    agent = (
        'echo "key $HEADROOM_TEST_SECRET"; echo "$HEADROOM_TEST_SECRET" > "$HEADROOM_LOGS_DIR/leak.txt"; '
        'touch "$HEADROOM_WORKDIR/out"'
    )
    launch, res = _run(
        tmp_path,
        {"kind": "command", "command": agent, "env_passthrough": ["HEADROOM_TEST_SECRET"]},
        extra_env={"HEADROOM_TEST_SECRET": SECRET, "HR_SECRET_NAMES": "HEADROOM_TEST_SECRET"},
    )
    assert res.report is not None
    want = records.expected(res.report)
    assert isinstance(want, tuple)
    data = records.from_log(res.stdout.encode(), *want)
    assert data is not None and SECRET.encode() not in data and SECRET not in res.stdout
    rec, arts = _kept(tmp_path, launch, res)
    assert arts["agent/stdout"][1] == b"key [REDACTED]\n"
    assert arts["logs/leak.txt"][1] == b"[REDACTED]\n"


def test_an_install_phase_is_recorded_apart_and_its_failure_is_agent_setup_failed(tmp_path: Path) -> None:
    ok = {
        "kind": "command",
        "command": 'echo ran; touch "$HEADROOM_WORKDIR/out"',
        "install": {"command": "echo installing; echo warn >&2", "timeout_s": 30},
    }
    launch, res = _run(tmp_path, ok)
    assert judged(res)[0].value == "passed"  # type: ignore[attr-defined]
    _, arts = _kept(tmp_path, launch, res)
    assert arts["agent_setup/stdout"][1] == b"installing\n" and arts["agent_setup/stderr"][1] == b"warn\n"
    assert arts["agent/stdout"][1] == b"ran\n"
    bad = {
        "kind": "command",
        "command": 'echo ran; touch "$HEADROOM_WORKDIR/out"',
        "install": {"command": "echo broken; exit 3", "timeout_s": 30},
    }
    launch, res = _run(tmp_path / "bad", bad)
    assert [str(getattr(v, "value", v)) for v in judged(res)] == ["infra_error", "agent_setup_failed"]
    assert res.report is not None and "agent_exit" not in res.report.fields
    _, arts = _kept(tmp_path / "bad", launch, res)
    assert arts["agent_setup/stdout"][1] == b"broken\n" and "agent/stdout" not in arts


def test_the_entry_cap_and_the_staging_time_bound_the_record_and_say_so(tmp_path: Path) -> None:
    many = 'touch "$HEADROOM_WORKDIR/out"; cd "$HEADROOM_LOGS_DIR" && i=0; while [ $i -lt 300 ]; do : > "f$i"; i=$((i+1)); done'
    launch, res = _run(tmp_path, {"kind": "command", "command": many}, extra_env={"HR_RECORDS_FILES": "100"})
    rec, arts = _kept(tmp_path, launch, res)
    assert rec.status == "kept" and any(e.startswith("over:") for e in rec.errors), rec
    assert sum(1 for n in arts if n.startswith("logs/f")) < 100
    # A staging stopped by its clock keeps what it got to and says so (a time bound, set to nothing here).
    # 3,000 entries cost two processes each to stage: never done within the watchdog's least second
    lots = many.replace("-lt 300", "-lt 3000")
    launch, res = _run(tmp_path / "slow", {"kind": "command", "command": lots}, extra_env={"HR_RECORDS_S": "0"})
    assert judged(res)[0].value == "passed"  # type: ignore[attr-defined]
    rec, _ = _kept(tmp_path / "slow", launch, res)
    assert rec.status == "kept" and any("ran out of time" in e for e in rec.errors), rec


def test_every_entry_is_recorded_once_whatever_the_cap_leaves(tmp_path: Path) -> None:
    """Output that spends the whole budget: the steps' stderr and every logs-dir file are each named once, dropped."""
    agent = (
        'touch "$HEADROOM_WORKDIR/out"; head -c 100000 /dev/zero | tr "\\0" x; echo err >&2; '
        'cd "$HEADROOM_LOGS_DIR" && echo small > small.txt && head -c 100000 /dev/zero > big.bin'
    )
    launch, res = _run(tmp_path, {"kind": "command", "command": agent}, extra_env={"HR_RECORDS_MAX": "16000"})
    rec, arts = _kept(tmp_path, launch, res)
    assert rec.status == "kept", rec
    assert not [n for n in arts if " #" in n], sorted(arts)  # no name twice
    assert arts["agent/stdout"][0].status == "truncated" and arts["agent/stdout"][0].original_size == 100000
    for name in ("agent/stderr", "logs/small.txt", "logs/big.bin"):
        assert arts[name][0].status == "dropped" and arts[name][0].original_size, name
