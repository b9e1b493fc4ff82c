"""The verifier's environment prelude, run for real (dash) on this host: what a task env or an image points into a
tree the agent could write never reaches the verifier.

The "work dir" is a temp folder holding what an agent would plant there (a ``bin/python3``, a module, a library, a
``BASH_ENV`` script); the corpus (tests/hostile/corpus.py) runs the same attacks through every backend.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.contract import verifier_env

SH = shutil.which("dash") or "/bin/sh"
DUMP = "import json, os; print(json.dumps({k: v for k, v in os.environ.items()}))"


def env_after(task_env: dict[str, str], untrusted: list[str]) -> dict[str, str]:
    """The environment the verifier's command sees, after the prelude."""
    env = verifier_env.build(task_env, {}, untrusted)
    argv = [SH, *verifier_env.wrap(["/usr/bin/python3", "-c", DUMP])[1:]]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture
def base() -> Iterator[Path]:
    """Outside /tmp (itself untrusted, so everything under pytest's tmp_path would be dropped for that alone), and
    outside the checkout when the checkout itself lies under /tmp (a clone in ``mktemp -d``)."""
    root = Path("/var/lib/headroom-tests")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:  # not root: the checkout's own cache folder
        root = Path(__file__).resolve().parents[2] / ".cache"
        root.mkdir(exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="verifier-env-", dir=root))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def work(base: Path) -> Path:
    w = base / "app"
    (w / "bin").mkdir(parents=True)
    (w / "lib").mkdir()
    (w / "bin" / "python3").write_text("#!/bin/sh\necho planted\n")
    (w / "env.sh").write_text("echo planted\n")
    (base / "via").symlink_to(w / "bin")  # a folder outside the work dir that leads into it
    (base / "home" / "lib").mkdir(parents=True)
    (base / "kept").mkdir()
    return w


def test_entries_into_the_agents_trees_are_dropped_and_the_rest_kept(work: Path, base: Path) -> None:
    got = env_after(
        {
            "PATH": f"{work}/bin:bin::.:{base}/via:/usr/local/bin:{base}/kept:/usr/bin:/bin:/tmp:/dev/shm:/nonexistent",
            "PYTHONPATH": f"{work}:{work}/lib:rel:/usr/lib/python3/dist-packages",
            "LD_LIBRARY_PATH": f"{work}/lib:/usr/lib",
            "LD_PRELOAD": f"/usr/lib/libc.so.6 {work}/lib/evil.so",
            "BASH_ENV": f"{work}/env.sh",
            "PYTHONHOME": "/usr",
            "ENV": "/etc/profile",
            "HOME": str(base / "home"),
            "NODE_PATH": f"{base}/home/lib",
            "CLASSPATH": f"{base}/kept/a.jar:{work}/b.jar",
        },
        [str(work), "/logs/agent"],
    )
    # the work dir, a link into it, a relative or empty entry, /tmp, /dev/shm, a folder that does not exist
    assert got["PATH"] == f"/usr/local/bin:{base}/kept:/usr/bin:/bin"
    assert got["CLASSPATH"] == f"{base}/kept/a.jar"
    assert got["PYTHONPATH"] == "/usr/lib/python3/dist-packages"
    assert got["LD_LIBRARY_PATH"] == "/usr/lib"
    assert "LD_PRELOAD" not in got and "BASH_ENV" not in got  # any untrusted path: the whole variable goes
    assert "NODE_PATH" not in got  # under $HOME: the agent's on a container backend
    assert got["PYTHONHOME"] == "/usr" and got["ENV"] == "/etc/profile"
    assert got["PYTHONSAFEPATH"] == "1" and got["PYTHONNOUSERSITE"] == "1"
    assert verifier_env.UNTRUSTED_VAR not in got and not any(k.startswith("hr_") for k in got)


def test_a_work_dir_of_root_or_home_of_root_untrusts_nothing_more() -> None:
    """An image without WORKDIR runs in /, and a non-root pod's HOME is often /: neither may drop every entry."""
    got = env_after({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/"}, ["/", "/logs/agent"])
    assert got["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_nothing_left_falls_back_to_the_system_path(work: Path) -> None:
    got = env_after({"PATH": f"{work}/bin:."}, [str(work)])
    assert got["PATH"] == "/usr/bin:/bin"


def test_an_agent_writable_tree_cannot_hold_the_separator() -> None:
    with pytest.raises(ValueError):
        verifier_env.build({}, {}, ["/a:/b"])


@pytest.mark.parametrize("shell", sorted({SH, shutil.which("bash") or SH}))
@pytest.mark.parametrize("oldpwd", [None, "/somewhere/before"])
def test_the_prelude_leaves_the_verifier_where_it_started(
    work: Path, base: Path, shell: str, oldpwd: str | None
) -> None:
    """The prelude enters each folder it resolves (no subshell per path); the verifier still starts in its own
    folder, reached through a link as it was, with PWD and OLDPWD as they were, and the filter's verdicts unchanged."""
    (base / "start-link").symlink_to(work)  # the verifier's folder, named through a link
    logical = str(base / "start-link")
    env = verifier_env.build({"PATH": f"{base / 'via'}:{base / 'kept'}:/usr/bin:/bin"}, {"PWD": logical}, [str(work)])
    if oldpwd is not None:
        env["OLDPWD"] = oldpwd
    show = 'pwd -P; echo "PWD=$PWD"; echo "OLDPWD=${OLDPWD-unset}"; echo "PATH=$PATH"'
    argv = [shell, *verifier_env.wrap(["/bin/sh", "-c", show])[1:]]
    res = subprocess.run(argv, env=env, cwd=logical, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == str(work.resolve())
    assert lines[1] == f"PWD={logical}"
    assert lines[3] == f"PATH={base / 'kept'}:/usr/bin:/bin"  # the link into the work dir is still dropped
    # OLDPWD as the same shell passes it on without the prelude (bash drops an inherited one, dash keeps it)
    bare = subprocess.run(
        [shell, "-c", 'exec "$@"', "sh", "/bin/sh", "-c", show], env=env, cwd=logical, capture_output=True, text=True
    )
    assert lines[:3] == bare.stdout.splitlines()[:3]
