"""`--json` on the listing commands that lacked it (`tasks validate`, `tasks show`), and `--json` as `--format json`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Headroom, one_line_error

FIX = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


def test_validate_json_says_what_the_table_says(headroom: Headroom) -> None:
    table = headroom("tasks", "validate", str(FIX / "tb_tasks"))
    res = headroom("tasks", "validate", str(FIX / "tb_tasks"), "--json")
    assert res.returncode == table.returncode == 1  # the exit code does not depend on the format
    doc = json.loads(res.stdout)
    assert doc["runs_as_is"] is False
    assert [b["path"].rsplit("/", 1)[-1] for b in doc["bad"]] == ["no-instruction"]
    assert {t["task"] for t in doc["needs_import"]} == {"big-build", "hello-world"}
    assert all(t["reason"] == "a legacy Terminal-Bench task.yaml" for t in doc["needs_import"])
    assert "headroom tasks import PATH --out-dir DIR" in " ".join(table.stdout.split())


def test_validate_json_of_a_set_that_runs_as_it_is(headroom: Headroom, tasks: Path) -> None:
    res = headroom("tasks", "validate", str(tasks), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["runs_as_is"], doc["tasks_ok"], doc["needs_import"], doc["bad"]) == (True, 1, [], [])


def test_show_is_a_table_and_json_on_json(headroom: Headroom) -> None:
    table = headroom("tasks", "show", str(FIX / "tb_tasks"), "big-build")
    assert table.returncode == 0, table.stderr
    assert "big-build" in table.stdout and "8192 MiB memory" in table.stdout
    assert "needs `headroom tasks import` first" in table.stdout  # a legacy task.yaml
    doc = json.loads(headroom("tasks", "show", str(FIX / "tb_tasks"), "big-build", "--json").stdout)
    assert doc["format"] == "terminal-bench" and doc["spec"]["environment"]["memory_mb"] == 8192
    assert doc["fields"] and all(f["field"] in table.stdout for f in doc["fields"])  # the same fields, as a table


def test_json_is_format_json_and_a_clash_is_one_line(headroom: Headroom) -> None:
    by_format = headroom("tasks", "list", str(FIX / "harbor_tasks"), "--format", "json")
    by_flag = headroom("tasks", "list", str(FIX / "harbor_tasks"), "--json")
    assert by_format.returncode == by_flag.returncode == 0 and by_format.stdout == by_flag.stdout
    json.loads(by_flag.stdout)
    one_line_error(
        headroom("tasks", "list", str(FIX / "harbor_tasks"), "--json", "--format", "table"),
        "--json: --json prints json, --format table",
    )
