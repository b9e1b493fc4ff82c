"""The contract's sanitiser script, run for real (dash, find, readlink) on a tree laid out like a verifier's view.

The view here is the host's: the "tests" are a folder under a temp dir, named in HR_SAN_HIDDEN.
On the backends the same script runs inside the sandbox, container or pod (tests/hostile).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.backends.kubernetes import scripts
from orchestrator.contract import phases, sanitiser

SH = shutil.which("dash") or "/bin/sh"


def run(root: Path, *, max_links: int = sanitiser.MAX_LINKS, user: str | None = None, roots: list[Path] | None = None,
        path: str | None = None) -> sanitiser.Report:
    env = sanitiser.env([str(root / "tests"), str(root / "logs" / "verifier")], [], max_links)
    if path is not None:
        env["PATH"] = path
    argv = [SH, *sanitiser.argv([str(r) for r in roots or [root / "app"]])[1:]]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--", *argv]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return sanitiser.parse(res.stdout, res.returncode, False)


@pytest.fixture
def view() -> Iterator[Path]:
    # Under /tmp itself, searchable by all: one test acts as another user (pytest's tmp_path is root's, 0700).
    root = Path(tempfile.mkdtemp(prefix="headroom-sanitiser-", dir="/tmp"))
    os.chmod(root, 0o755)
    for d in ("tests", "logs/verifier", "app", "elsewhere", "a/b"):
        (root / d).mkdir(parents=True)
    (root / "tests" / "expected.txt").write_text("secret\n")
    (root / "sys").symlink_to(root / "a" / "b")  # a link the agent did not make (a system one)
    yield root
    subprocess.run(["chmod", "-R", "u+rwx", str(root)], check=False)
    shutil.rmtree(root, ignore_errors=True)


def test_every_path_to_the_tests_goes_and_honest_links_stay(view: Path) -> None:
    app = view / "app"
    depth = len(view.parts) - 1  # enough `..` from /usr/bin to reach / whatever the temp dir
    bad = {
        "direct": view / "tests" / "expected.txt",
        # through a system symlink, then `..` (resolved by the system, not as text): /bin -> usr/bin on merged /usr
        "system-link-dotdot": Path("/bin/../../" + "/".join(view.parts[1:]) + "/tests/expected.txt"),
        "proc": Path(f"/proc/self/root{view}/tests/expected.txt"),
        "ancestor": Path("/"),
        "tests-parent": view,
        "reward-to-be": view / "logs" / "verifier" / "reward.txt",  # does not exist yet: kept as written
        "dangling-dotdot": Path(f"{view}/nowhere/../tests/expected.txt"),
        # the case: `..` after a link that is not the agent's: as text it lands above the view (harmless),
        # the kernel goes sys -> a/b, then up twice, into the tests
        "other-link-then-dotdot": Path(f"{view}/sys/../../tests/expected.txt"),
    }
    for name, target in bad.items():
        (app / name).symlink_to(target)
    (app / "sub").mkdir()
    (app / "sub" / "rel").symlink_to(Path("../" * (depth + 2)) / "/".join(view.parts[1:]) / "tests")
    (view / "elsewhere" / "x").symlink_to(view / "tests" / "expected.txt")
    (app / "to-elsewhere").symlink_to(view / "elsewhere")  # the verifier reaches elsewhere/x through it
    (app / "py").symlink_to("/usr/bin/python3")
    (app / "real").write_text("fine")
    (app / "ok").symlink_to("real")
    report = run(view)
    assert report.status == "ok", report
    assert report.counts["links_removed"] == len(bad) + 2  # sub/rel, elsewhere/x
    assert report.counts["links_kept"] == 3  # py, ok, to-elsewhere
    left = {p.name for p in app.iterdir() if p.is_symlink()}
    assert left == {"py", "ok", "to-elsewhere"}
    assert not (view / "elsewhere" / "x").is_symlink()


def test_fifos_sockets_and_permissions(view: Path) -> None:
    app = view / "app"
    os.mkfifo(app / "answer")
    (app / "d").mkdir()
    (app / "d" / "f").write_text("x")
    os.chmod(app / "d" / "f", 0)
    os.chmod(app / "d", 0)
    report = run(view)
    assert report.status == "ok" and report.counts["special_removed"] == 1
    assert not (app / "answer").exists()
    assert stat.S_IMODE((app / "d").stat().st_mode) & 0o700 == 0o700
    assert stat.S_IMODE((app / "d" / "f").stat().st_mode) & 0o600 == 0o600


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to act as two users")
def test_a_folder_the_verifiers_user_cannot_list_is_the_agents_failure(view: Path) -> None:
    """As non-root: a folder the verifier's user may not chmod (another owner) and cannot list."""
    os.chmod(view, 0o755)
    app = view / "app"
    os.chown(app, 65534, 65534)
    (app / "hidden").mkdir()
    (app / "hidden" / "link").symlink_to(view / "tests" / "expected.txt")
    os.chmod(app / "hidden", 0o700)  # root's, unlistable by nobody; its parent is nobody's but the folder is not empty
    report = run(view, user="65534")
    assert report.status == "incomplete", report
    assert report.counts["unlistable"] >= 1


def test_past_its_bound_every_link_goes_unjudged_and_the_state_is_exhausted(view: Path) -> None:
    for i in range(5):
        (view / "app" / f"l{i}").symlink_to("/usr/bin/python3")
    report = run(view, max_links=4)
    assert report.status == "exhausted"
    assert report.counts["links_unjudged"] == 5
    assert not any(p.is_symlink() for p in (view / "app").iterdir())
    # At the bound exactly, every link is judged: the bound is a count of links, not a time.
    for i in range(5):
        (view / "app" / f"l{i}").symlink_to("/usr/bin/python3")
    report = run(view, max_links=5)
    assert report.status == "ok" and report.counts["links_kept"] == 5


def test_a_deep_link_chain_is_judged_in_bounded_work(view: Path) -> None:
    app = view / "app"
    prev = view / "tests" / "expected.txt"
    for i in range(200):  # past the kernel's 40 links: the verifier could not follow it, it goes anyway
        (app / f"c{i}").symlink_to(prev)
        prev = app / f"c{i}"
    report = run(view)
    assert report.status == "ok"  # 200 links: within the bound, so judged in full
    # Once the first hop is gone the rest dangle inside the work dir: what is left leads nowhere hidden.
    tests = view / "tests"
    for p in app.iterdir():
        assert tests not in Path(os.path.realpath(p)).parents, p


def test_a_root_that_is_itself_a_link_into_the_tests_becomes_an_empty_folder(view: Path) -> None:
    work = view / "work"
    work.symlink_to(view / "tests")
    report = run(view, roots=[work])
    assert report.status == "ok" and report.counts["roots_replaced"] == 1
    assert work.is_dir() and not work.is_symlink() and not list(work.iterdir())


def test_a_non_utf8_link_name_is_judged_like_any_other(view: Path) -> None:
    name = os.fsencode(view / "app") + b"/\xff\xfeanswer"
    os.symlink(os.fsencode(view / "tests" / "expected.txt"), name)
    report = run(view)
    assert report.status == "ok" and report.counts["links_removed"] == 1
    assert not os.path.lexists(name)


def test_no_shell_verdict_is_a_crash_not_a_pass() -> None:
    assert sanitiser.parse("", 127, False).status == "crashed"
    assert sanitiser.parse("status=ok\n", 0, True).status == "crashed"
    assert sanitiser.parse("status=ok\nlinks_removed=3\n", 0, False).counts["links_removed"] == 3


def test_the_pod_runner_runs_the_contracts_phase_list_and_sanitiser() -> None:
    text = scripts.runner()
    assert f"for phase in {phases.shell_list()}; do" in text
    for p in phases.PHASES:
        assert f"phase_{p.value}()" in text, p
    assert sanitiser.script().splitlines()[5] in text  # the script itself, not a copy of it
    assert "@" + "PHASES@" not in text
