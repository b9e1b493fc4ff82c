"""The exec channel's Python client is one self-contained file: a copy of it, imported by a bare interpreter (no
site-packages, so no headroom), talks to a real exec server, options and all."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import orchestrator.agents.exec as client_module
from orchestrator.agents.exec.server import ExecServer
from orchestrator.agents.exec.target import ExecResult
from orchestrator.artifacts import execlog


class HostTarget:
    """Commands as host processes: the channel's other end, so this test is about the client file alone."""

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float | None = None,
        user: str | None = None,
    ) -> ExecResult:
        try:
            p = subprocess.run(
                list(argv), cwd=cwd, env=dict(env or {}), input=stdin or b"", capture_output=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return ExecResult(exit_code=None, timed_out=True)
        return ExecResult(
            exit_code=p.returncode,
            stdout=p.stdout,
            stderr=p.stderr,
            stdout_bytes=len(p.stdout),
            stderr_bytes=len(p.stderr),
        )


AGENT = r"""
import json, sys
import headroom_exec as hx
assert "orchestrator" not in sys.modules
out = {}
r = hx.run(["bash", "-c", "pwd; echo $GREETING; cat; echo oops >&2; exit 3"], cwd="/tmp", env={"GREETING": "hi"},
           stdin="from stdin\n")
out["run"] = [r.exit_code, r.returncode, r.text, r.stderr.decode(), r.stdout_bytes]
t = hx.run("sleep 5", timeout=0.5)
out["timeout"] = [t.timed_out, t.returncode]
try:
    hx.run(["true"], socket_path="/nonexistent/exec.sock")
except hx.ExecChannelError as exc:
    out["no_channel"] = str(exc)
print(json.dumps(out))
"""


def test_a_copy_of_the_client_file_runs_with_the_standard_library_alone(tmp_path: Path) -> None:
    lib = tmp_path / "agent-venv-lib"
    lib.mkdir()
    shutil.copy(client_module.__file__, lib / "headroom_exec.py")
    with ExecServer(HostTarget(), base_env={"PATH": "/usr/bin:/bin"}) as srv:
        # -I: no user site, no PYTHON* variables, no script dir; -S: no site-packages at all (no headroom)
        res = subprocess.run(
            [sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(lib)!r})\n" + AGENT],
            env={"HEADROOM_EXEC_SOCKET": srv.socket_path},
            capture_output=True,
            text=True,
            timeout=60,
        )
        log = srv.log_bytes()
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["run"] == [3, 3, "/tmp\nhi\nfrom stdin\n", "oops\n", len("/tmp\nhi\nfrom stdin\n")]
    assert out["timeout"] == [True, 124]
    assert "exec channel /nonexistent/exec.sock" in out["no_channel"]
    records = [execlog.ExecRecord.model_validate_json(line) for line in log.splitlines()]
    assert [(r.cwd, r.exit_code, r.timed_out) for r in records] == [("/tmp", 3, False), (None, None, True)]
