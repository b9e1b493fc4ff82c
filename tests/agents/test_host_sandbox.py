"""The host-side (external) agent's own sandbox (orchestrator/agents/host_sandbox.py), with real bubblewrap.

A Python agent installed in a virtualenv runs in it unchanged and sees its own files, a private HOME and
/tmp, the exec channel and nothing else of the host; where the sandbox cannot start the sweep refuses an
external agent unless it is declared trusted, and the reports say it ran unsandboxed; the gateway's upstream
key is gone from headroom's environment even for an agent that can read headroom's /proc.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

from orchestrator.agentio.redact import redact_text, transformed
from orchestrator.artifacts import names
from tests.agents.fake_model import FakeModel, Reply
from tests.agents.test_external_agent import artifacts
from tests.hostile.harness import reports, requires_sandbox
from tests.taskfactory import write_task

REPO = Path(__file__).resolve().parents[2]
UPSTREAM_KEY = "sk-host-sandbox-upstream-0123456789abcdef"
#: Stands in for a machine where bubblewrap cannot start (the one thing this machine cannot be): the CLI with
#: the host sandbox's probe failing, everything else real.
NO_SANDBOX = (
    "import sys; from orchestrator.agents import host_sandbox as hb; "
    "from orchestrator.errors import SandboxUnavailable\n"
    "def refuse(): raise SandboxUnavailable('bubblewrap (bwrap) is not installed')\n"
    "hb._probe = refuse; sys.argv[0] = 'headroom'; from orchestrator.cli import main; main()"
)


def cli(tmp_path: Path, spec: dict, *flags: str, env: dict[str, str] | None = None, sandbox: bool = True):  # type: ignore[no-untyped-def]
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(spec))
    head = [sys.executable, "-m", "orchestrator"] if sandbox else [sys.executable, "-c", NO_SANDBOX]
    return subprocess.run(
        [*head, "sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db"), "--format", "none"]
        + ["--no-canary", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


#: What a hostile agent would look at, printed for the test to read.
LOOK = textwrap.dedent("""\
    import os, sys
    import agentlib  # from its virtualenv's site-packages
    import headroom_exec as hx
    print("home", os.environ["HOME"], "cwd", os.getcwd(), "uid", os.getuid())
    print("root", sorted(os.listdir("/")))
    print("pids", len([p for p in os.listdir("/proc") if p.isdigit()]))
    for probe in sys.argv[1:]:
        try:
            os.listdir(probe) if os.path.isdir(probe) else open(probe).read()
            print("visible", probe)
        except OSError as exc:
            print("hidden", probe, type(exc).__name__)
    open(os.path.join(os.environ["HOME"], "scratch"), "w").write("mine")
    open(os.path.join(os.environ["HEADROOM_LOGS_DIR"], "note.txt"), "w").write(agentlib.ANSWER)
    r = hx.run(["bash", "-c", "echo " + agentlib.ANSWER + " > answer && pwd"])
    print("exec", r.exit_code, r.text.strip())
    """)


@requires_sandbox
def test_a_virtualenv_agent_runs_unchanged_and_sees_only_its_own_files(tmp_path: Path, tasks_root: Path) -> None:
    write_task(
        tasks_root,
        "t",
        solve="true\n",
        test='grep -qx 42 "$HEADROOM_WORKDIR/answer" && echo 1 > "$HEADROOM_LOGS_DIR/reward.txt" || echo 0 > "$HEADROOM_LOGS_DIR/reward.txt"\n',
    )
    venv = tmp_path / "agent-venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "agentlib.py").write_text("ANSWER = '42'\n")
    program = venv / "bin" / "my-agent"
    program.write_text(f"#!{venv}/bin/python\n" + LOOK)
    program.chmod(0o755)
    secret_file = tmp_path / "not-for-the-agent.txt"
    secret_file.write_text("private")
    probes = [
        str(tasks_root / "t" / "tests" / "test.sh"),  # the task's tests, by their host path
        str(secret_file),
        str(tmp_path / "h.db"),  # the store
        str(tmp_path / "exp.yaml"),  # the experiment file named in headroom's command line
        str(REPO / "pyproject.toml"),  # headroom's checkout
        "/root/.bashrc",
        "/var/run/docker.sock",
        "/etc/shadow",
    ]
    res = cli(
        tmp_path,
        {
            "tasks_dir": str(tasks_root),
            "configurations": ["1"],
            "attempts": 1,
            "agent": {"kind": "external", "command": f"{program} {' '.join(probes)}"},
        },
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    (trial_id, outcome) = db.execute("SELECT trial_id, outcome FROM executions").fetchone()
    kept = artifacts(db, trial_id)
    out = kept[names.AGENT_STDOUT].decode()
    assert outcome == "passed", out + kept.get(names.AGENT_STDERR, b"").decode()
    assert "home /home/agent cwd " + os.getcwd() in out  # headroom's working directory, empty in the sandbox
    assert "uid 65534" in out or os.geteuid() != 0  # dropped to nobody when headroom is root
    assert all(f"hidden {p} " in out for p in probes), out
    assert "exec 0 /app" in out
    pids = int(next(ln.split()[1] for ln in out.splitlines() if ln.startswith("pids ")))
    assert pids <= 4  # bwrap's init, the agent, its shell: no process of the host's
    assert kept[f"{names.LOGS_PREFIX}/note.txt"] == b"42"
    prov = json.loads(db.execute("SELECT json FROM provenance").fetchone()[0])
    assert prov["agent_sandbox"]["sandboxed"] is True and str(venv) in prov["agent_sandbox"]["shown_read_only"]
    db.close()


def test_without_a_sandbox_an_external_agent_is_refused_unless_declared_trusted(
    tmp_path: Path, tasks_root: Path
) -> None:
    write_task(tasks_root, "t", solve="true\n")
    spec = {"tasks_dir": str(tasks_root), "configurations": ["1"], "attempts": 1}
    # The agent looks for the gateway's upstream key where a process of headroom's user can: headroom's own
    # /proc/PID/environ (start-up block included) and its own environment.
    look = (
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q 'orchestrator' && "
        "{ echo saw-headroom; tr '\\0' '\\n' < $p/environ | grep -c " + UPSTREAM_KEY + "; }; done; "
        "env | grep -c " + UPSTREAM_KEY + "; true"
    )
    with FakeModel([Reply("hi")], openai_key=UPSTREAM_KEY) as fake:
        spec["gateway"] = {"openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP_KEY"}}
        spec["agent"] = {"kind": "external", "command": look}
        refused = cli(tmp_path, spec, env={"UP_KEY": UPSTREAM_KEY}, sandbox=False)
        assert refused.returncode == 2
        err = refused.stderr.strip().splitlines()
        assert len([ln for ln in err if ln.startswith("error")]) == 1 and "Traceback" not in refused.stderr
        assert "agent.trusted" in err[-1] and "bubblewrap (bwrap) is not installed" in err[-1]
        assert not (tmp_path / "h.db").exists() or sqlite3.connect(tmp_path / "h.db").execute(
            "SELECT count(*) FROM sqlite_master WHERE name='executions'"
        ).fetchone()[0] in (0, 1)
        trusted = cli(tmp_path, spec, "--trusted-agent", env={"UP_KEY": UPSTREAM_KEY}, sandbox=False)
        assert trusted.returncode == 0, trusted.stderr
    db = sqlite3.connect(tmp_path / "h.db")
    run_id = db.execute("SELECT run_id FROM runs ORDER BY created_at DESC").fetchone()[0]
    trial_id = db.execute("SELECT trial_id FROM executions WHERE run_id=?", (run_id,)).fetchone()[0]
    out = artifacts(db, trial_id)[names.AGENT_STDOUT].decode()
    assert "saw-headroom" in out  # unsandboxed, it reads headroom's /proc ...
    assert set(out.replace("saw-headroom", "").split()) == {"0"}, out  # ... and finds the key nowhere
    prov = json.loads(db.execute("SELECT json FROM provenance WHERE run_id=?", (run_id,)).fetchone()[0])
    assert prov["agent_sandbox"] == {
        "sandboxed": False,
        "trusted": True,
        "fallback_reason": "bubblewrap (bwrap) is not installed",
    }
    db.close()
    texts = reports(tmp_path / "h.db", run_id)
    for fmt in ("table", "markdown", "html", "json"):
        assert "host agent NOT sandboxed" in texts[fmt] or (fmt == "json" and '"none (trusted)"' in texts[fmt]), fmt


def test_the_upstream_key_is_taken_out_of_the_environment_and_its_start_up_block() -> None:
    # The child knows the key only reversed (CHECK), so a search for it finds UP_KEY's copy alone.
    code = textwrap.dedent("""\
        import os, subprocess
        from orchestrator.agentio.environ import take
        key = os.environ["CHECK"][::-1]
        before = key.encode() in open("/proc/self/environ", "rb").read()
        assert take(["UP_KEY"]) == {"UP_KEY": key}
        block = open("/proc/self/environ", "rb").read()
        child = subprocess.run(["env"], capture_output=True, text=True).stdout
        print(before, key.encode() in block, key in os.environ.values(), key in child)
        """)
    env = {**os.environ, "UP_KEY": UPSTREAM_KEY, "CHECK": UPSTREAM_KEY[::-1]}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "False", "False", "False"]


@requires_sandbox
@pytest.mark.parametrize("where", ["holds the tasks", "lies in a task", "holds every try's files"])
def test_an_agent_view_that_would_show_the_tasks_is_refused(tmp_path: Path, tasks_root: Path, where: str) -> None:
    write_task(tasks_root, "t", solve="true\n")
    path = {
        "holds the tasks": tmp_path,
        "lies in a task": tasks_root / "t" / "tests",
        "holds every try's files": Path(tempfile.gettempdir()),
    }[where]
    spec = {
        "tasks_dir": str(tasks_root),
        "configurations": ["1"],
        "attempts": 1,
        "agent": {"kind": "external", "command": "true", "path": str(path)},
    }
    res = cli(tmp_path, spec)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "agent.path" in res.stderr and ("it holds" in res.stderr or "it lies in" in res.stderr), res.stderr


@pytest.mark.parametrize("prefix", ["", "a", "ab", "abc", "key: "])
def test_a_key_in_any_transformed_form_is_found_and_redacted(prefix: str) -> None:
    forms = transformed(UPSTREAM_KEY)
    raw = (prefix + UPSTREAM_KEY + "!").encode()
    encoded = {
        "reversed": (prefix + UPSTREAM_KEY)[::-1],
        "upper": (prefix + UPSTREAM_KEY).upper(),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode(),
    }
    for how, text in encoded.items():
        assert any(f in text for f in forms), how
        assert not any(f in redact_text(text, forms) for f in forms), how


@requires_sandbox
@pytest.mark.parametrize(
    "where",
    [
        "holds a kubeconfig",
        "its program's install is headroom's HOME",
        "named",
        "lies in ~/.kube",
        "an interpreter under ~/.pyenv",
    ],
)
def test_an_agent_view_that_would_show_a_host_credential_is_refused_unless_named(
    tmp_path: Path, tasks_root: Path, where: str
) -> None:
    """The agent's directory, or the install its program is found in, holding ~/.kube, a KUBECONFIG or all of
    headroom's HOME would show the host's credentials to the agent: refused, unless the user names it."""
    write_task(tasks_root, "t", solve="true\n")
    home, agent = tmp_path / "home", tmp_path / "agent"
    (home / "bin").mkdir(parents=True)
    (agent / "kube").mkdir(parents=True)
    (agent / "kube" / "config").write_text("apiVersion: v1\nkind: Config\n")
    tool = home / "bin" / "python3.99"  # not a system program: its install (PREFIX/bin/python3.99) is shown
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    env = {"HOME": str(home), "PATH": f"{home / 'bin'}:{os.environ['PATH']}"}
    agent_spec: dict[str, object] = {"kind": "external", "command": "python3.99 -c 1"}
    if where == "holds a kubeconfig":
        agent_spec = {"kind": "external", "command": "true", "path": str(agent)}
        env["KUBECONFIG"] = str(agent / "kube" / "config")
    elif where == "named":
        agent_spec["host_paths"] = [str(home)]
    elif where == "lies in ~/.kube":
        (home / ".kube").mkdir()
        agent_spec = {"kind": "external", "command": "true", "path": str(home / ".kube")}
    elif where == "an interpreter under ~/.pyenv":  # a part of a home that holds no credential is the agent's own
        prefix = home / ".pyenv" / "versions" / "3.99" / "bin"
        prefix.mkdir(parents=True)
        tool.rename(prefix / "python3.99")
        env["PATH"] = f"{prefix}:{os.environ['PATH']}"
    spec = {"tasks_dir": str(tasks_root), "configurations": ["1"], "attempts": 1, "agent": agent_spec}
    res = cli(tmp_path, spec, env=env)
    if where in ("named", "an interpreter under ~/.pyenv"):
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "a credential of this host" in res.stderr and "agent.host_paths" in res.stderr, res.stderr
