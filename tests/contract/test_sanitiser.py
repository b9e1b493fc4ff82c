"""The contract's sanitiser script, run for real (dash, find, readlink) on a tree laid out like a verifier's view.

The view here is the host's: the "tests" are a folder under a temp dir, named in HR_SAN_HIDDEN.
On the backends the same script runs inside the sandbox, container or pod (tests/hostile).
"""

from __future__ import annotations

import os
import re
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


def view_env(root: Path, prune: list[Path] = (), max_links: int = sanitiser.MAX_LINKS) -> dict[str, str]:  # type: ignore[assignment]
    """The script's environment over ``root``'s view: its tests and verifier logs hidden, as the backends set it."""
    return sanitiser.env([str(root / "tests"), str(root / "logs" / "verifier")], [str(p) for p in prune], max_links)


def run(
    root: Path,
    *,
    max_links: int = sanitiser.MAX_LINKS,
    user: str | None = None,
    roots: list[Path] | None = None,
    path: str | None = None,
    prune: list[Path] = (),
    cwd: Path | None = None,  # type: ignore[assignment]
    wrap: list[str] = (),
    env_more: dict[str, str] | None = None,
) -> sanitiser.Report:  # type: ignore[assignment]
    env = view_env(root, prune, max_links)
    env.update(env_more or {})
    if path is not None:
        env["PATH"] = path
    argv = [*wrap, SH, *sanitiser.argv([str(r) for r in roots or [root / "app"]])[1:]]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--", *argv]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=cwd)
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


def test_only_a_clean_exit_without_a_verdict_counts_as_a_lost_verdict() -> None:
    """The script prints its verdict right before its one ``exit 0``: exit 0 with none means the output was lost."""
    assert sanitiser.parse("", 0, False).lost
    assert sanitiser.parse("links_removed=1\n", 0, False).lost  # cut before the last line
    assert not sanitiser.parse("", 127, False).lost  # no shell: the script never ran
    assert not sanitiser.parse("", None, False).lost  # killed: no exit code
    assert not sanitiser.parse("", 0, True).lost  # ran out of time
    assert not sanitiser.parse("status=exhausted\n", 0, False).lost
    assert not sanitiser.parse("status=ok\n", 0, False).lost


#: The shells an image's ``/bin/sh`` is: dash (Debian, Ubuntu) and bash in its POSIX mode (Fedora, RHEL, Amazon Linux).
SHELLS = {"dash": [SH], **({"bash-posix": [bash, "--posix"]} if (bash := shutil.which("bash")) else {})}


@pytest.mark.parametrize("shell", list(SHELLS))
def test_the_script_writes_a_copy_of_its_verdict_where_asked_and_a_failed_copy_changes_nothing(
    view: Path, shell: str
) -> None:
    """The copy a runtime that lost the output is read from (the Docker backend) is the verdict the script printed;
    a copy that cannot be written (no such folder, a full disk, a file-size limit) is no verdict and leaves the
    printed one and the exit code as they were, in each shell an image's ``/bin/sh`` may be."""
    (view / "app" / "peek").symlink_to(view / "tests" / "expected.txt")
    copy = view / "verdict"
    printed = run(view, env_more={"HR_SAN_VERDICT": str(copy)})
    assert printed.status == "ok" and printed.counts["links_removed"] == 1
    got = sanitiser.recovered(copy.read_bytes())
    assert got is not None and (got.status, got.counts) == (printed.status, printed.counts)
    assert got.from_copy and got.evidence(0.1).detail == sanitiser.RECOVERED_DETAIL
    env = {**view_env(view), "HR_SAN_VERDICT": "", "APP": str(view / "app")}
    for unwritable, limit in ((view / "no-such-folder" / "verdict", ""), ("/dev/full", ""), (copy, "ulimit -f 0; ")):
        (view / "app" / "peek").symlink_to(view / "tests" / "expected.txt")
        env["HR_SAN_VERDICT"] = str(unwritable)
        script = limit + 'exec "$@" -c "$HR_SAN_SCRIPT" headroom-sanitise "$APP"'
        res = subprocess.run(
            [SH, "-c", script, "sh", *SHELLS[shell]], env=env, capture_output=True, text=True, timeout=120
        )
        assert res.returncode == 0 and res.stdout.count("status=") == 1, (unwritable, limit, res)
        again = sanitiser.parse(res.stdout, res.returncode, False)
        assert (again.status, again.counts) == (printed.status, printed.counts), unwritable


def test_only_a_whole_copy_of_a_verdict_is_read_as_one() -> None:
    assert sanitiser.recovered(None) is None  # never written
    assert sanitiser.recovered(b"") is None  # made, never filled
    assert sanitiser.recovered(b"links_removed=1\nlinks_unjudged=0\n") is None  # cut before its status line
    assert sanitiser.recovered(b"status=crashed\n") is None  # no status the script prints
    got = sanitiser.recovered(b"links_removed=2\nstatus=exhausted\n")
    assert got is not None and got.status == "exhausted" and got.counts == {"links_removed": 2} and not got.lost
    assert got.detail == ""  # what an agent's fault quotes stays the script's own words; the evidence says where from
    assert got.evidence(0.1).detail == sanitiser.RECOVERED_DETAIL


def test_a_verdict_that_cannot_be_written_never_exits_0(view: Path) -> None:
    """What makes a clean exit without a verdict the runtime's loss: the script exits 0 only once its verdict is
    written. A full disk under the file headroom reads its output from (the local backend's) fails the write:
    /dev/full gives the real ENOSPC, and the script must not exit 0, or a disk-filling agent would turn its
    unjudged state into an infra error."""
    (view / "app" / "peek").symlink_to(view / "tests" / "expected.txt")
    env = view_env(view)
    with open("/dev/full", "w") as full:
        res = subprocess.run([SH, *sanitiser.argv([str(view / "app")])[1:]], env=env, stdout=full, timeout=120)
    assert res.returncode == 3
    assert not (view / "app" / "peek").is_symlink()  # it did its work; only the verdict could not be written
    assert run(view).status == "ok"  # the same tree, with a stdout that takes the verdict


def test_judges_words_a_shell_could_not_read_make_the_state_incomplete_never_ok(view: Path) -> None:
    """Where /bin/sh is bash (Fedora, RHEL, Amazon Linux images), a here-document larger than a pipe goes to a
    temp file; a full disk refuses it, and bash skips the loop that reads the judges' words and goes on. Without a
    check that the loop read find's last line, the links those words named (1,100 here, each a ``D`` line to a
    folder) went uncounted and the state came out ``ok``. The full disk is a real one: a file-size limit of 0."""
    app = view / "app"
    for i in range(1100):
        target = app / f"folder-with-a-rather-long-name-to-fill-the-here-document-{i:04d}"
        target.mkdir()
        (app / f"l{i}").symlink_to(target)
    env = view_env(view)
    full_disk = ["bash", "-c", "ulimit -f 0; trap '' XFSZ; exec \"$@\"", "full-disk"]
    res = subprocess.run(
        [*full_disk, "bash", "--posix", *sanitiser.argv([str(app)])[1:]],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "here-document" in res.stderr  # the shell really could not make it
    report = sanitiser.parse(res.stdout, res.returncode, False)
    assert report.status == "incomplete" and report.counts["unlistable"] >= 1, (report, res.stderr[-300:])


def test_the_script_exits_0_in_one_place_after_its_checked_verdict() -> None:
    """Every ``exit`` is ``exit 1`` (no ``/``), the ``--judge`` helper's ``exit 0`` (find runs it, never headroom),
    the failed verdict's ``exit 3``, or the last line."""
    lines = (Path(sanitiser.__file__).parent / "sanitise.sh").read_text().rstrip("\n").splitlines()
    judge_start = next(i for i, line in enumerate(lines) if line.startswith('if [ "${1:-}" = --judge ]'))
    judge_end = next(i for i in range(judge_start, len(lines)) if lines[i] == "fi")
    for i, line in enumerate(lines):
        code = line.split("#")[0]
        if not re.search(r"\bexit\b", code):
            continue
        assert (
            "exit 1" in code
            or code.rstrip().endswith("|| exit 3")
            or (judge_start < i < judge_end and code.strip() == "exit 0")
            or i == len(lines) - 1
        ), (i, line)
    assert lines[-1] == "exit 0" and lines[-2] == "verdict || exit 3"
    printed = lines.index("verdict() {")  # what `verdict` prints: every count, the status last
    assert lines[printed + 1].lstrip().startswith("printf 'links_removed=%s") and lines[printed + 3].rstrip().endswith(
        '"$status"'
    )
    assert lines[printed + 4] == "}"


def test_the_pod_runner_runs_the_contracts_phase_list_and_sanitiser() -> None:
    text = scripts.runner()
    # Two halves (the agent's container, then the verifier's fresh one): split at `stop`, the whole list in order.
    cut = phases.PHASES.index(phases.Phase.STOP) + 1
    agent_half = " ".join(p.value for p in phases.PHASES[:cut])
    verifier_half = " ".join(p.value for p in phases.PHASES[cut:])
    assert f"for phase in {agent_half}; do" in text and f"for phase in {verifier_half}; do" in text
    assert f"{agent_half} {verifier_half}" == phases.shell_list()
    assert text.index(f"for phase in {agent_half};") < text.index(f"for phase in {verifier_half};")
    for p in phases.PHASES:
        assert f"phase_{p.value}()" in text, p
    assert sanitiser.script().splitlines()[5] in text  # the script itself, not a copy of it
    assert "@" + "PHASES@" not in text


def _follows_to_tests(path: Path, tests: Path) -> bool:
    """What the kernel reaches through ``path`` (a link or a folder holding links): anything in the tests?"""
    found = [path] if path.is_symlink() else []
    if path.is_dir() and not path.is_symlink():
        found += [p for p in path.rglob("*") if p.is_symlink()]
    return any(tests == Path(os.path.realpath(p)) or tests in Path(os.path.realpath(p)).parents for p in found)


@pytest.mark.parametrize("suffix", [b"\n", b"\n\n", b"\t", b"\x01", b"\nx"])
def test_a_target_holding_a_newline_or_control_character_is_never_judged_as_other_text(
    view: Path, suffix: bytes
) -> None:
    """`$(readlink ...)` strips trailing newlines: a link to "evil\\n" was judged as "evil" (absent: kept), and the
    folder it really reaches, holding a link into the tests, was never searched."""
    evil = os.fsencode(view / "elsewhere" / "evil") + suffix
    os.mkdir(evil)
    os.symlink(os.fsencode(view / "tests"), evil + b"/t")
    os.symlink(evil, os.fsencode(view / "app" / "l"))
    report = run(view)
    assert report.status == "ok", report
    assert not os.path.lexists(view / "app" / "l")
    # A folder NAME holding a newline, reached as it is (no link text to strip), is searched like any other.
    (view / "app" / "d").mkdir()
    inner = os.fsencode(view / "app" / "d") + b"/n" + suffix
    os.mkdir(inner)
    os.symlink(os.fsencode(view / "tests" / "expected.txt"), inner + b"/answer")
    report = run(view)
    assert report.status == "ok" and report.counts["links_removed"] == 1, report
    assert not os.path.lexists(inner + b"/answer")


def test_a_folder_named_like_a_pattern_is_searched_and_never_expanded(view: Path) -> None:
    """The judge's words were split unquoted with globbing on, in the work dir: a folder named `*` matched a decoy
    the agent made there, the decoy was searched instead, and the real folder's link into the tests stayed."""
    star = view / "elsewhere" / "*"
    star.mkdir()
    (star / "t").symlink_to(view / "tests")
    app = view / "app"
    (app / "l").symlink_to(star)
    decoy = app / ("D" + str(view / "elsewhere"))  # `D<view>/elsewhere/*` as a pattern, relative to the work dir
    (decoy / "decoy").mkdir(parents=True)
    report = run(view, cwd=app)  # as the pod runner ran it: in the work dir
    assert report.status == "ok", report
    assert not (star / "t").is_symlink()
    assert not _follows_to_tests(app, view / "tests")


def test_a_link_into_a_tree_never_searched_goes_unless_that_tree_is_read_only(view: Path) -> None:
    """A pod's /headroom/run (a writable emptyDir in the pruned /headroom) or a persisting /dev/shm: a folder link
    there was kept and never searched."""
    pruned = view / "pruned"
    (pruned / "d").mkdir(parents=True)
    (pruned / "d" / "t").symlink_to(view / "tests")
    (pruned / "f").write_text("x")
    app = view / "app"
    (app / "dir").symlink_to(pruned / "d")
    (app / "file").symlink_to(pruned / "f")
    (app / "absent").symlink_to(pruned / "later")
    report = run(view, prune=[pruned])
    assert report.status == "ok", report
    assert report.counts["links_removed"] == 3
    assert not any(p.is_symlink() for p in app.iterdir())


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root to mount read-only")
def test_a_link_into_a_read_only_tree_never_searched_stays(view: Path) -> None:
    """The honest case the rule above must keep: a link into read-only system content (the local sandbox binds
    /usr read-only and never searches it). A writable mount beneath the read-only one makes it unprovable."""
    pruned = view / "pruned"
    (pruned / "d" / "rw").mkdir(parents=True)
    (pruned / "f").write_text("x")
    app = view / "app"
    (app / "file").symlink_to(pruned / "f")
    (app / "dir").symlink_to(pruned)
    (app / "rwdir").symlink_to(pruned / "d")
    env = sanitiser.env([str(view / "tests"), str(view / "logs" / "verifier")], [str(pruned)])
    script = (
        f"mount --bind {pruned} {pruned} && mount -o remount,ro,bind {pruned} && "
        f'mount -t tmpfs none {pruned}/d/rw && exec {SH} -c "$HR_SAN_SCRIPT" s {app}'
    )
    res = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = sanitiser.parse(res.stdout, res.returncode, False)
    assert report.status == "ok", (report, res.stderr)
    assert {p.name for p in app.iterdir() if p.is_symlink()} == {"file"}  # dir, rwdir: a writable mount beneath


def _exponential(app: Path, target: Path, levels: int = 3, width: int = 100) -> None:
    """Links that expand exponentially: a{k} -> a{k-1}/a{k-1}/... (``width`` times), a0 -> ``.``."""
    (app / "x").mkdir()
    (app / "x" / "a0").symlink_to(".")
    for k in range(1, levels + 1):
        (app / "x" / f"a{k}").symlink_to("/".join([f"a{k - 1}"] * width))
    (app / "bomb").symlink_to(f"x/a{levels}/" + "/".join([".."] * 2) + str(target))


def test_a_link_that_expands_exponentially_is_bounded_and_unjudged(view: Path) -> None:
    """One `readlink -m` of 4 links x 100 components x 3 levels ran for over ten minutes; each resolution now has
    its bound, one past it stops the judging: what is left goes unjudged and the state is exhausted."""
    app = view / "app"
    _exponential(app, view / "tests" / "expected.txt")
    for i in range(5):
        (app / f"more{i}").symlink_to(f"x/a3/t{i}")
    report = run(view)
    assert report.status == "exhausted", report
    assert report.counts["judging_stopped"] == 1 and report.counts["links_unjudged"] >= 1
    assert report.resolve_bound == f"{sanitiser.RESOLVE_S}s"
    assert not (app / "bomb").is_symlink()
    assert not _follows_to_tests(app, view / "tests")


def test_past_its_budget_every_link_left_goes_unjudged(view: Path) -> None:
    app = view / "app"
    (app / "ok").symlink_to("/usr/bin/python3")
    report = run(view, env_more={"HR_SAN_BUDGET_S": "0"})
    assert report.status == "exhausted" and report.counts["links_unjudged"] == 1, report
    assert not (app / "ok").is_symlink()
