"""A report, a comparison and a calibration are shown from the store only while nothing they read has changed.

`headroom report` (every format), `runs compare` and `runs calibrate` keep what they computed in the store
(orchestrator/store/derived.py, orchestrator/report/stored.py) and show it again without the statistics. Each
test runs the real commands on a real store made by a real sweep or import. To tell a stored result from a
computed one, a test marks the stored result in place (``mark``: its run name becomes SENTINEL, a write to the
results table, which by design changes no token): a command that shows SENTINEL read the stored result; one
that does not computed afresh. Then every way a row can change (the store's API, a plain sqlite3 UPDATE, an
import, a resume, a regrade, a schema change) must make the next command compute again and show the new number.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from orchestrator.store import derived
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.importers.formats import T, write_tb_run
from tests.taskfactory import requires_cgroups, write_task

SENTINEL = "SENTINEL: read from the stored result"


def headroom(*args: str) -> str:
    return run_cli(*args, env={"COLUMNS": "200"}, check=True).stdout


def report(store: Path, *args: str) -> dict:
    return json.loads(headroom("report", str(store), "--format", "json", *args))


def stored_kinds(store: Path) -> list[str]:
    with sqlite3.connect(store) as db:
        return sorted(r[0] for r in db.execute("SELECT kind FROM derived_results"))


def mark(store: Path, *, sign: bool = True) -> int:
    """Put SENTINEL where each stored result names its run; how many results were marked. ``sign``: with this
    user's HMAC, as headroom itself would store it (else the old MAC stays: what a forger without the key writes)."""
    secret = derived.local_key()
    assert secret is not None
    db = sqlite3.connect(store)
    rows = db.execute("SELECT kind, key, value FROM derived_results").fetchall()
    for kind, key, value in rows:
        if kind == "report/html":
            value = value.replace("</h1>", f" {SENTINEL}</h1>", 1)
        else:
            doc = json.loads(value)
            doc["a" if kind == "comparison" else "run"]["name"] = SENTINEL
            value = json.dumps(doc)
        db.execute("UPDATE derived_results SET value = ? WHERE kind = ? AND key = ?", (value, kind, key))
        if sign:
            mac = derived._mac(secret, kind, key, value)
            db.execute("UPDATE derived_results SET mac = ? WHERE kind = ? AND key = ?", (mac, kind, key))
    db.commit()
    db.close()
    return len(rows)


def sweep(root: Path, store: Path, *args: str) -> None:
    headroom("sweep", str(root), "--store", str(store), "--format", "none", "--model", "test-model", *args)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep: one task that passes, one that fails; two configurations, two attempts."""
    root = tmp_path_factory.mktemp("tasks")
    write_task(root, "steady", solve='touch "$HEADROOM_WORKDIR/out"\n', extra_toml='cluster_id = "a"\n')
    write_task(root, "never", solve="exit 1\n", extra_toml='cluster_id = "b"\n')
    store = tmp_path_factory.mktemp("store") / "h.db"
    sweep(root, store, "--multipliers", "1,unbounded", "--attempts", "2")
    return store


@pytest.fixture
def store(swept: Path, tmp_path: Path) -> Path:
    """A copy of the sweep's store for one test (the copy carries no stored result: the sweep printed none)."""
    copy = tmp_path / "h.db"
    shutil.copy(swept, copy)
    return copy


def passed(doc: dict) -> dict[str, int]:
    return {c["label"]: c["counts"]["passed"] for c in doc["configurations"]}


@pytest.mark.parametrize("fmt", ["json", "markdown", "table", "html"])
def test_every_format_is_the_same_from_the_stored_result_and_reads_it(store: Path, tmp_path: Path, fmt: str) -> None:
    def show() -> str:
        if fmt in ("html", "table"):  # to a file: the table then has a fixed width, the HTML needs one
            out = tmp_path / f"report.{'html' if fmt == 'html' else 'txt'}"
            headroom("report", str(store), "--format", fmt, "-o", str(out))
            return out.read_text()
        return headroom("report", str(store), "--format", fmt)

    computed = show()
    assert stored_kinds(store) == (["report", "report/html"] if fmt == "html" else ["report"])
    assert show() == computed  # the stored result renders to the very same bytes
    assert mark(store)
    assert SENTINEL in show()  # and it was the stored result that was shown


def test_a_plain_sqlite3_update_makes_the_next_report_compute_the_new_number(store: Path) -> None:
    before = report(store)
    assert passed(before) == {"1x-strict": 2, "unbounded": 2}
    mark(store)
    assert report(store)["run"]["name"] == SENTINEL
    # One of the steady task's passes becomes a failure, behind headroom's back.
    with sqlite3.connect(store) as db:
        trial = db.execute(
            "SELECT trial_id FROM executions WHERE final = 1 AND outcome = 'passed' AND trial_id LIKE '%1x-strict%' "
            "ORDER BY trial_id LIMIT 1"
        ).fetchone()[0]
        db.execute("UPDATE executions SET outcome = 'failed', reward = 0 WHERE trial_id = ? AND final = 1", (trial,))
    after = report(store)
    assert after["run"]["name"] != SENTINEL
    assert passed(after) == {"1x-strict": 1, "unbounded": 2}
    # ... and that new result is stored and read in its turn.
    mark(store)
    assert report(store)["run"]["name"] == SENTINEL


def test_a_change_through_the_store_api_makes_the_next_report_compute(store: Path) -> None:
    assert report(store)["run"]["status"] == "finished"
    mark(store)
    s = Store(store)
    s.set_status(s.run().run_id, "interrupted")
    s.close()
    doc = report(store)
    assert (doc["run"]["name"], doc["run"]["status"]) != (SENTINEL, "finished")
    assert doc["run"]["status"] == "interrupted"


def test_an_import_into_the_store_makes_the_next_report_compute(store: Path, tmp_path: Path) -> None:
    rid = json.loads(headroom("runs", "list", "--store", str(store), "--json"))["runs"][0]["run_id"]
    first = report(store)
    mark(store)
    write_tb_run(tmp_path / "tb" / "run-1", [T("t1", True), T("t2", False)], per_trial_copies=False)
    headroom("results", "import", str(tmp_path / "tb"), "--store", str(store))
    again = json.loads(headroom("report", f"{store}:{rid}", "--format", "json"))
    assert again["run"]["name"] != SENTINEL
    assert again["configurations"] == first["configurations"]
    latest = report(store)  # the store's latest run is now the import: its own report, not the sweep's
    assert latest["run"]["run_id"] != rid and latest["run"]["backend"].startswith("import:")


def test_a_resume_makes_the_next_report_compute_the_new_trials(swept: Path, tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    shutil.copy(swept, store)
    # A run killed before two of its trials finished: their tries abandoned, the run interrupted.
    with sqlite3.connect(store) as db:
        db.execute(
            "UPDATE executions SET status = 'abandoned', final = 0 WHERE final = 1 AND trial_id IN "
            "(SELECT trial_id FROM executions WHERE final = 1 ORDER BY trial_id LIMIT 2)"
        )
        db.execute("UPDATE runs SET status = 'interrupted'")
    assert report(store)["run"]["trials_finished"] == 6
    mark(store)
    headroom("resume", "--store", str(store), "--format", "none")
    doc = report(store)
    assert doc["run"]["name"] != SENTINEL
    assert doc["run"]["trials_finished"] == doc["run"]["trials_planned"] == 8


@pytest.mark.cgroup
@requires_cgroups
def test_a_regrade_makes_the_next_report_of_the_regraded_run_compute(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    answer = json.dumps(json.dumps({"answer": "3.14"}))
    write_task(
        root,
        "pi",
        solve=f"printf '%s' {answer} > \"$HEADROOM_AGENT_RESULT\"\n",
        test="exit 0\n",
        extra_toml="[grader]\nnumeric = {value = 3.14159, tolerance = 0.01}\n",
    )
    store = tmp_path / "s.db"
    sweep(root, store, "--multipliers", "unbounded", "--attempts", "2")
    rid = json.loads(headroom("runs", "list", "--store", str(store), "--json"))["runs"][0]["run_id"]
    assert passed(report(store)) == {"unbounded": 2}
    mark(store)
    stricter = tmp_path / "g.toml"
    stricter.write_text("[graders.pi]\nnumeric = {value = 3.14159, tolerance = 0.0001}\n")
    headroom("runs", "regrade", "--store", str(store), "--grader", str(stricter), "--format", "json")
    original = json.loads(headroom("report", f"{store}:{rid}", "--format", "json"))
    assert original["run"]["name"] != SENTINEL and passed(original) == {"unbounded": 2}
    regraded = report(store)  # the latest run: the regrade's own, with its flips
    assert regraded["run"]["run_id"] != rid and passed(regraded) == {"unbounded": 0}


def test_different_options_never_share_a_stored_result(store: Path) -> None:
    plain = report(store)
    mark(store)
    for args in (("--rules", "all"), ("--margin", "0.1"), ("--reference", "unbounded")):
        doc = report(store, *args)
        assert doc["run"]["name"] != SENTINEL, args
    assert report(store, "--margin", "0.1")["statistics"]["calibration"]["margin"] == 0.1
    assert plain["statistics"]["calibration"]["margin"] != 0.1
    assert stored_kinds(store) == ["report"] * 4


def test_a_table_without_triggers_or_a_dropped_trigger_turns_the_stored_results_off(store: Path) -> None:
    report(store)
    # Every table the store has (all but the results' own two) carries one trigger per kind of change.
    with sqlite3.connect(store) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        triggers = {r[0] for r in db.execute("SELECT tbl_name FROM sqlite_master WHERE type = 'trigger'")}
        assert {"runs", "trials", "executions", "evidence", "provenance", "tasks"} <= tables
        assert triggers == tables - {"derived_state", "derived_results"}
        db.execute("DROP TRIGGER derived_state_executions_update")
        # A row changed while nothing watched.
        db.execute("UPDATE executions SET outcome = 'failed', reward = 0 WHERE final = 1 AND outcome = 'passed'")
    mark(store)
    doc = report(store)
    assert doc["run"]["name"] != SENTINEL and passed(doc) == {"1x-strict": 0, "unbounded": 0}
    assert stored_kinds(store) == ["report"]  # nothing new kept while a trigger is missing
    # A table some later code adds, written by a plain sqlite3 shell: no trigger on it, so nothing is read.
    Store(store).close()  # a writable open puts the missing trigger back
    report(store)
    mark(store)
    assert report(store)["run"]["name"] == SENTINEL
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE later (x)")
    assert report(store)["run"]["name"] != SENTINEL
    Store(store).close()  # and gives the new table its triggers
    with sqlite3.connect(store) as db:
        count = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'later'")
        assert count.fetchone()[0] == 3


def test_a_store_that_cannot_be_written_still_prints_the_report(store: Path) -> None:
    expected = report(store)
    with sqlite3.connect(store) as db:
        db.execute("DELETE FROM derived_results")
    # Another process holds the write lock for the whole report: keeping the result fails, the report prints.
    lock = sqlite3.connect(store, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        assert report(store) == expected
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert stored_kinds(store) == []


def test_a_stored_result_that_fails_to_load_is_computed_again(store: Path) -> None:
    expected = report(store)
    with sqlite3.connect(store) as db:
        db.execute('UPDATE derived_results SET value = \'{"not": "a report"}\'')
    assert report(store) == expected


def test_compare_is_stored_and_voided_by_a_change_in_either_store(store: Path, tmp_path: Path) -> None:
    other = tmp_path / "b.db"
    shutil.copy(store, other)
    cmp = ("runs", "compare", str(store), str(other), "--format", "json")
    first = headroom(*cmp)
    assert stored_kinds(store) == ["comparison"] and stored_kinds(other) == []
    assert headroom(*cmp) == first
    mark(store)
    assert SENTINEL in headroom(*cmp)
    with sqlite3.connect(other) as db:  # B changes: the comparison kept in A must not be shown
        db.execute("UPDATE executions SET outcome = 'failed', reward = 0 WHERE final = 1 AND outcome = 'passed'")
    changed = headroom(*cmp)
    assert SENTINEL not in changed and changed != first


def test_calibrate_is_stored_and_voided_by_a_change(store: Path, tmp_path: Path) -> None:
    def calibrate(out: str) -> str:
        headroom("runs", "calibrate", str(store), "--out-dir", str(tmp_path / out))
        return (tmp_path / out / "bands.json").read_text()

    first = calibrate("a")
    assert stored_kinds(store) == ["calibration"]
    assert calibrate("b") == first
    assert (tmp_path / "a" / "summary.md").read_text() == (tmp_path / "b" / "summary.md").read_text()
    mark(store)
    assert SENTINEL in calibrate("c")
    with sqlite3.connect(store) as db:
        db.execute("UPDATE executions SET peak_memory_bytes = peak_memory_bytes + 1 WHERE final = 1")
    assert SENTINEL not in calibrate("d")


def test_the_report_a_sweep_prints_at_its_end_is_kept_for_the_next_report(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    write_task(root, "steady", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path / "h.db"
    headroom("sweep", str(root), "--store", str(store), "--multipliers", "1", "--attempts", "1", "--model", "m")
    assert stored_kinds(store) == ["report"]  # the summary it printed came from the document it kept
    mark(store)
    assert report(store)["run"]["name"] == SENTINEL


#: Markup, script, terminal controls and a forged Markdown heading (tests/report/test_hostile_strings.py has more).
HOSTILE = "<img src=x onerror=alert(1)><script>x()</script>[red]r[/red] **b** |p| \x1b[31mred\x1b]0;t\x07\n## Forged"


def test_hostile_strings_come_out_of_a_stored_result_exactly_as_escaped_as_computed(tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    tb = tmp_path / "tb"
    task = HOSTILE.replace("/", "%").replace("\n", " ")
    write_tb_run(tb / "run-1", [T(task, True, mode=HOSTILE), T(task, False, mode=HOSTILE)], agent=HOSTILE,
                 model=HOSTILE, per_trial_copies=False)  # fmt: skip
    headroom("results", "import", str(tb), "--store", str(store), "--name", HOSTILE)
    outputs: dict[str, list[str]] = {}
    for fmt in ("json", "markdown", "table", "html"):
        out = tmp_path / f"r.{fmt}"
        for _ in range(2):  # computed and kept, then shown from the store
            headroom("report", str(store), "--format", fmt, "-o", str(out))
            outputs.setdefault(fmt, []).append(out.read_text())
    for fmt, (computed, kept) in outputs.items():
        assert kept == computed, fmt
    assert "<script>x()" not in outputs["html"][1] and "<img src=x" not in outputs["html"][1]
    assert "\x1b" not in outputs["table"][1] and "\x1b" not in outputs["markdown"][1]
    assert json.loads(outputs["json"][1])["run"]["name"] == HOSTILE  # raw in the data, escaped where rendered
    assert stored_kinds(store) == ["report", "report/html"]


def test_a_result_this_users_headroom_did_not_store_is_computed_again(store: Path, tmp_path: Path) -> None:
    # A store file from someone else can hold any result under the right key (the key is no secret: the token is
    # in the file, the code's version in the package). Only a result with this user's HMAC is shown.
    report(store)
    assert mark(store, sign=False) == 1
    assert report(store)["run"]["name"] != SENTINEL  # a changed value under the old MAC: computed again
    assert mark(store, sign=True) == 1
    assert report(store)["run"]["name"] == SENTINEL  # the control: signed as headroom signs, it is read
    # The same store read by another user (another key): what this user stored is not theirs to trust.
    other = tmp_path / "other-user"
    out = run_cli("report", str(store), "--format", "json", env={"HEADROOM_CACHE_DIR": str(other)}, check=True)
    assert json.loads(out.stdout)["run"]["name"] != SENTINEL
    assert (other / derived.KEY_FILE).stat().st_mode & 0o777 == 0o600
