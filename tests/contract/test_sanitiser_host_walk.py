"""The host walk that spares an honest tree the sanitiser script (issue 32): it may only ever say what the script says.

Each tree is judged twice, for real: by :func:`sanitiser.nothing_to_judge` and by ``sanitise.sh`` (dash, find,
readlink) on a copy laid out alike. Where the walk says "nothing to judge", the script must print the walk's own
report and change nothing; every kind of entry the script acts on must send the walk to the script.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.contract import sanitiser
from tests.contract.test_sanitiser import run


@pytest.fixture
def view() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="headroom-walk-", dir="/tmp"))
    os.chmod(root, 0o755)
    for d in ("tests", "logs/verifier", "logs/agent", "app/src/pkg"):
        (root / d).mkdir(parents=True)
    (root / "tests" / "expected.txt").write_text("secret\n")
    (root / "app" / "out.txt").write_text("x" * 1000)
    (root / "app" / "src" / "pkg" / "mod.py").write_text("print(1)\n")
    (root / "logs" / "agent" / "result.json").write_text("{}\n")
    os.chmod(root / "app" / "src" / "pkg" / "mod.py", 0o755)
    yield root
    subprocess.run(["chmod", "-R", "u+rwx", str(root)], check=False)
    shutil.rmtree(root, ignore_errors=True)


def roots(view: Path) -> list[Path]:
    return [view / "app", view / "logs" / "agent"]


def snapshot(view: Path) -> dict[str, tuple[int, int, str]]:
    out = {}
    for r in roots(view):
        for dirpath, dirs, files in os.walk(r):
            for n in (*dirs, *files):
                p = Path(dirpath) / n
                st = p.lstat()
                out[str(p)] = (st.st_mode, st.st_uid, os.readlink(p) if p.is_symlink() else "")
    return out


def me() -> int | None:
    return None if os.geteuid() == 0 else os.geteuid()


def test_an_honest_tree_gets_exactly_the_scripts_verdict_and_is_left_as_it_was(view: Path) -> None:
    assert sanitiser.nothing_to_judge(roots(view), me())
    before = snapshot(view)
    script = run(view, roots=roots(view))
    assert script == sanitiser.Report("ok", sanitiser.nothing_judged(2).counts, resolve_bound=script.resolve_bound), (
        script
    )
    assert snapshot(view) == before  # the script had nothing to do: the walk skipped nothing


def _fifo(p: Path) -> None:
    os.mkfifo(p / "answer")


def _socket(p: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p / "sock"))
    s.close()


def _chmod(rel: str, mode: int) -> Callable[[Path], None]:
    def f(p: Path) -> None:
        os.chmod(p / rel, mode)

    return f


def _link(target: str) -> Callable[[Path], None]:
    def f(p: Path) -> None:
        (p / "src" / "answer").symlink_to(target)

    return f


#: Every kind of entry the script acts on, made in the work dir (``p``): each must go to the script.
ACTED_ON: dict[str, Callable[[Path], None]] = {
    "link-into-the-tests": lambda p: (p / "answer").symlink_to(p.parent / "tests" / "expected.txt"),
    "link-to-the-system": _link("/usr/bin/python3"),  # kept by the script, but judged: counted in links_kept
    "dangling-link": _link("nowhere"),
    "fifo": _fifo,
    "socket": _socket,
    "folder-without-u+rwx": _chmod("src/pkg", 0o500),
    "folder-without-any-mode": _chmod("src", 0o000),
    "file-without-u+rw": _chmod("out.txt", 0o400),
    "file-without-any-mode": _chmod("src/pkg/mod.py", 0o000),
}


@pytest.mark.parametrize("case", sorted(ACTED_ON))
def test_every_entry_the_script_acts_on_sends_the_tree_to_the_script(view: Path, case: str) -> None:
    ACTED_ON[case](view / "app")
    assert not sanitiser.nothing_to_judge(roots(view), me())
    before = snapshot(view)
    script = run(view, roots=roots(view))
    # the script did something the walk's report would not say: changed the tree or counted what it judged
    assert snapshot(view) != before or script != sanitiser.nothing_judged(2), script


def test_a_root_that_is_a_link_or_missing_goes_to_the_script(view: Path) -> None:
    (view / "alias").symlink_to(view / "app")
    assert not sanitiser.nothing_to_judge([view / "alias"], me())
    assert not sanitiser.nothing_to_judge([view / "gone"], me())
    (view / "file").write_text("")
    assert not sanitiser.nothing_to_judge([view / "file"], me())


def test_a_folder_of_another_user_goes_to_the_script(view: Path) -> None:
    """The script fixes folders that are not the verifier's own (unless it runs as root): so must the walk defer."""
    uid = os.geteuid()
    assert sanitiser.nothing_to_judge(roots(view), uid)
    assert not sanitiser.nothing_to_judge(roots(view), uid + 1)


def test_more_entries_than_its_bound_or_a_path_too_long_goes_to_the_script(view: Path) -> None:
    for i in range(30):
        (view / "app" / f"f{i}").write_text("")
    assert sanitiser.nothing_to_judge(roots(view), me())
    assert not sanitiser.nothing_to_judge(roots(view), me(), max_entries=20)
    deep = view / "app"
    fd = os.open(deep, os.O_RDONLY)
    try:  # past PATH_MAX, made relative to each new folder
        for _ in range(300):
            os.mkdir("d" * 30, dir_fd=fd)
            nxt = os.open("d" * 30, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    assert not sanitiser.nothing_to_judge(roots(view), me())
