"""The wrapper that starts each local step (issue 32's cuts): what it must still guarantee.

Before the workload's first instruction the wrapper joins the trial's cgroup, reports on a pipe
only it holds, and (for a sandboxed step) opens the seccomp program bubblewrap installs. It is
``dash`` with its verdict pipe on fd 0 and opens that program itself, one process fewer than a
``bash`` wrapper plus a ``sh`` for the filter. These tests pin down what that must keep: the
step starts inside its cgroup with its own input and holds neither the pipe nor anything else
of the wrapper's; a sandboxed step runs under the filter; and the wrapper, which runs as
headroom's user on the host before any sandbox, runs nothing its environment names (a task's
env tables reach it: ``BASH_ENV`` or an exported function made a ``bash`` wrapper run the
task's code there), while the workload still gets that environment unchanged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.isolation import cgroups, process, sandbox
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.resources import ResourceAmounts
from tests.hostile.harness import requires_sandbox, sweep, write_hostile_task
from tests.taskfactory import requires_cgroups

pytestmark = [pytest.mark.slow, requires_cgroups]


@pytest.fixture
def trial_cgroup(tmp_path: Path) -> Iterator[cgroups.TrialCgroup]:
    driver = cgroups.detect(f"headroom-test-stepwrap-{tmp_path.name}")
    try:
        cg = driver.create(
            "t",
            ResourceAmounts(request_cpus=1, request_memory_bytes=64 << 20, limit_cpus=None, limit_memory_bytes=None),
            pids_max=64,
        )
        try:
            yield cg
        finally:
            cg.remove()
    finally:
        driver.close()


def _step(
    tmp_path: Path,
    cg: cgroups.TrialCgroup,
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    fd3: str | None = None,
    cwd: Path | None = None,
) -> StepFacts:
    facts, _ = process.run_step(
        "step",
        argv,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        cwd=cwd or tmp_path,
        logs_dir=tmp_path,
        timeout_s=30,
        cgroup=cg,
        limits=process.Limits(None),
        stdin=stdin,
        fd3=fd3,
    )
    return facts


def _fds(out: str) -> list[str]:
    lines = out.splitlines()
    return sorted(lines[lines.index("FDS") + 1 : lines.index("END")])


def test_the_step_starts_in_its_cgroup_with_its_input_and_holds_nothing_of_the_wrappers(
    tmp_path: Path, trial_cgroup: cgroups.TrialCgroup
) -> None:
    # The workload's own shell has its fds listed by a child before it opens anything (a glob would open the
    # dir, a pipeline's pipe would be open in the shell while it runs).
    script = 'cat /proc/self/cgroup; echo FDS; ls /proc/$$/fd; echo END; read line; echo "IN $line"'
    facts = _step(tmp_path, trial_cgroup, ["sh", "-c", script], stdin=b"the step's own input\n")
    assert facts.spawn_error is None and facts.exit_code == 0, facts
    out = facts.stdout_tail
    for d in trial_cgroup.dirs.values():  # every hierarchy's trial cgroup, as the kernel reports it
        rel = str(d).split("/", 4)[-1]  # /sys/fs/cgroup/<controller>/<path>
        assert any(line.endswith("/" + rel.split("/", 1)[1]) for line in out.splitlines()), (rel, out)
    assert _fds(out) == ["0", "1", "2"], out  # no verdict pipe, no fd 3, nothing else the wrapper had
    assert "IN the step's own input" in out
    # without input the step reads an empty /dev/null, as before
    facts = _step(tmp_path, trial_cgroup, ["sh", "-c", 'read line || echo "EOF"'])
    assert facts.exit_code == 0 and "EOF" in facts.stdout_tail, facts


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_the_wrapper_runs_nothing_its_environment_names_and_passes_it_on_unchanged(
    tmp_path: Path, trial_cgroup: cgroups.TrialCgroup, shell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With dash, and with bash as the wrapper's shell too (a host whose ``sh`` is bash and has no dash)."""
    found = shutil.which(shell)
    if found is None:
        pytest.skip(f"no {shell} here")
    monkeypatch.setattr(process, "_SH", found)
    ran = tmp_path / "ran"
    hostile = {
        "BASH_ENV": f"$(echo BASH_ENV >> {ran})",
        "ENV": f"$(echo ENV >> {ran})",
        "BASH_FUNC_command%%": f"() {{ echo command >> {ran}; }}",
        "BASH_FUNC_echo%%": f"() {{ builtin echo echo >> {ran}; }}",
        "SHELLOPTS": "xtrace",
        "PS4": f"$(echo PS4 >> {ran})",
        # names a wrapper might use for itself: the workload must see the step's own values
        "f": "the step's f",
        "fd": "the step's fd",
        # names that are not shell names: dash would drop them, the workload still gets them (as on Docker)
        "a-b": "1",
        "x.y": "2",
        "-starts-with-a-dash": "3",
    }
    facts = _step(tmp_path, trial_cgroup, ["/usr/bin/env", "-0"], env=hostile)
    assert facts.spawn_error is None and facts.exit_code == 0, facts
    assert not ran.exists(), ran.read_text()
    seen = dict(kv.split("=", 1) for kv in facts.stdout_tail.split("\0") if "=" in kv)
    for k, v in hostile.items():
        assert seen.get(k) == v, (k, seen.get(k))
    assert "HEADROOM_CG_PROCS" not in seen
    # (a shell's own variables, IFS, PWD, OPTIND, are the shell's, as they were with bash)


def test_a_file_for_fd3_is_open_there_and_a_missing_one_is_the_wrappers_verdict(
    tmp_path: Path, trial_cgroup: cgroups.TrialCgroup
) -> None:
    data = tmp_path / "for-fd3"
    data.write_text("on fd three\n")
    facts = _step(tmp_path, trial_cgroup, ["sh", "-c", "cat <&3"], fd3=str(data))
    assert facts.spawn_error is None and facts.stdout_tail == "on fd three\n", facts
    facts = _step(tmp_path, trial_cgroup, ["sh", "-c", "echo ran"], fd3=str(tmp_path / "missing"))
    assert facts.spawn_error is not None and "fd 3" in facts.spawn_error, facts
    assert "ran" not in facts.stdout_tail
    with pytest.raises(ValueError):
        process.run_step(
            "x",
            ["true"],
            env={},
            cwd=tmp_path,
            logs_dir=tmp_path,
            timeout_s=5,
            cgroup=trial_cgroup,
            limits=process.Limits(None),
            pass_fds=(process.FD3,),
            fd3=str(data),
        )


@requires_sandbox
def test_a_sandboxed_step_runs_under_its_seccomp_filter_opened_by_the_wrapper(
    tmp_path: Path, trial_cgroup: cgroups.TrialCgroup, request: pytest.FixtureRequest
) -> None:
    box = sandbox.probe()
    if box.filter is None:
        pytest.skip(f"no seccomp filter here: {box.filter_fallback_reason}")
    assert sandbox.SECCOMP_FD == process.FD3  # the fd run_step opens is the one bwrap reads
    # the sandbox user must reach its bind: pytest's own tmp dirs are not searchable by others
    reachable = Path(tempfile.mkdtemp(prefix="headroom-test-stepwrap-"))
    request.addfinalizer(lambda: shutil.rmtree(reachable, ignore_errors=True))
    os.chmod(reachable, 0o711)
    app = reachable / "app"
    app.mkdir()
    os.chown(app, box.uid, box.gid)
    for network in (False, True):
        view = sandbox.StepView(
            task_dir=Path("/"), task_entries=[], binds=[sandbox.Bind(app, sandbox.APP, True)], network=network
        )
        argv = box.argv(
            view,
            ["sh", "-c", 'grep "^Seccomp:" /proc/self/status; id -u; echo FDS; ls /proc/$$/fd; echo END'],
            filter_opened=True,
        )
        assert "headroom-seccomp" not in argv  # no process of its own opens the filter
        flt = box.filter_for(view)
        assert flt is not None and flt is (box.filter if network else box.offline_filter)
        facts = _step(tmp_path, trial_cgroup, argv, fd3=flt.path, cwd=app)
        assert facts.spawn_error is None and facts.exit_code == 0, facts
        lines = facts.stdout_tail.splitlines()
        assert "Seccomp:\t2" in lines, facts  # mode 2: a filter is installed
        assert str(box.uid) in lines
        assert _fds(facts.stdout_tail) == ["0", "1", "2"], facts
        # the same argv without the program on fd 3 does not start: the filter is never silently left out
        facts = _step(tmp_path, trial_cgroup, argv, cwd=app)
        assert facts.exit_code != 0 and "Seccomp:\t2" not in facts.stdout_tail, facts


@requires_sandbox
def test_a_tasks_env_tables_run_nothing_on_the_host(tasks_root: Path, tmp_path: Path) -> None:
    """End to end: a task whose env tables name shell start-up code and the loader's variables; they may act inside
    the sandbox (the step's own bash reads them there), never on the host, where the wrapper, setpriv and bwrap run
    as headroom's user before the sandbox."""
    ran = tmp_path / "host-marker"
    # the loader of every host-side process (the wrapper, setpriv, bwrap) would write LD_DEBUG_OUTPUT.<pid> here;
    # inside the sandbox this host folder does not exist
    ld_out = tmp_path / "ld-debug"
    env_table = (
        f"LD_DEBUG = 'files'\nLD_DEBUG_OUTPUT = '{ld_out}'\n"
        f"BASH_ENV = '$(echo BASH_ENV >> {ran})'\n"
        f"'BASH_FUNC_command%%' = '() {{ echo command >> {ran}; }}'\n"
        f"'BASH_FUNC_echo%%' = '() {{ builtin echo echo >> {ran}; }}'\n"
    )
    write_hostile_task(
        tasks_root,
        "env-tables",
        "echo hi > $HEADROOM_WORKDIR/answer\n",
        extra_toml=f"[environment.env]\n{env_table}[verifier.env]\n{env_table}",
    )
    run = sweep(tasks_root, tmp_path)
    assert len(run.outcomes) == 1, run.outcomes
    assert not ran.exists(), ran.read_text()
    assert not list(tmp_path.glob("ld-debug*")), sorted(p.name for p in tmp_path.glob("ld-debug*"))
