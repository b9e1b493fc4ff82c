"""Reports from a real (small) sweep: JSON fields, Markdown blocks, self-contained HTML, compare."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_run import headroom
from tests.taskfactory import HOG, write_task

FLAKY = (
    "python3 -c \"import os,sys; sys.exit(0 if int(os.environ['HEADROOM_SEED']) % 3 else 1)\" "
    '&& touch "$HEADROOM_WORKDIR/out"\n'
)


@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    write_task(
        root,
        "hog",
        solve=HOG.format(mb=80),
        memory_mb=64,
        extra_toml='cluster_id = "memory"\nlicense_or_access = "Apache-2.0"\n',
    )
    write_task(root, "flaky", solve=FLAKY, extra_toml='cluster_id = "luck"\n')
    write_task(root, "steady", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path_factory.mktemp("store") / "h.db"
    res = headroom(
        "sweep",
        str(root),
        "--multipliers",
        "1,2,unbounded",
        "--attempts",
        "3",
        "--store",
        str(store),
        "--format",
        "none",
        "--model",
        "test-model",
    )
    assert res.returncode == 0, res.stderr
    return store


def test_json_report_has_what_issue_2_promises(sweep_store: Path) -> None:
    res = headroom("report", "--store", str(sweep_store), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    configs = {c["label"]: c for c in doc["configurations"]}
    assert list(configs) == ["1x-strict", "1x/2x", "unbounded"]
    strict = configs["1x-strict"]
    for key in ("request_multiplier", "limit_multiplier", "enforcement", "counts", "pass_rate", "infra_error_rate"):
        assert key in strict
    assert strict["enforcement"][0].startswith(("cgroup-", "rlimit"))
    assert strict["counts"]["infra_error"] == 3 and strict["infra_reasons"] == {"oom_killed": 3}
    assert configs["unbounded"]["limit_multiplier"] is None and configs["unbounded"]["counts"]["infra_error"] == 0
    ir = strict["infra_error_rate"]
    assert (ir["k"], ir["n"]) == (3, 9) and ir["low"] < 3 / 9 < ir["high"]
    prov = doc["provenance"]
    assert prov["backend"]["host"]["kernel"] and prov["orchestrator"]["version"]
    assert set(prov["tasks"]) == {"hog", "flaky", "steady"} and all(
        len(t["digest"]) == 64 for t in prov["tasks"].values()
    )
    assert doc["experiment"]["model"]["name"] == "test-model"
    stats = doc["statistics"]
    assert stats["comparisons"]["adjustment"] == "holm"
    assert stats["calibration"]["status"] == "refused"  # 3 tasks cannot support a recommendation
    assert doc["task_provenance_mix"]["license_or_access"] == {"Apache-2.0": 1, "unrecorded": 2}


def test_markdown_opens_with_the_summary_then_the_four_blocks(sweep_store: Path) -> None:
    res = headroom("report", "--store", str(sweep_store), "--format", "markdown")
    assert res.returncode == 0, res.stderr
    heads = re.findall(r"^## (.+)$", res.stdout, flags=re.M)
    assert heads[:5] == ["Summary", "Setup", "Task provenance mix", "Metrics", "Exclusions"]
    assert "oom_killed" in res.stdout and "cluster-level" in res.stdout and "Calibration recommendation" in heads


def test_html_is_one_self_contained_file_with_plots(sweep_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = headroom("report", "--store", str(sweep_store), "--format", "html", "-o", str(out))
    assert res.returncode == 0, res.stderr
    html = out.read_text()
    assert html.count('src="data:image/png;base64,') == 1  # the rates plot
    assert html.count('<table class="heatmap">') == 1 and 'title="hog × 1x-strict: 0/3 passed, 3 infra' in html
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing fetched from elsewhere
    for block in ("Setup", "Task provenance mix", "Metrics", "Exclusions"):
        assert f"<h2>{block}</h2>" in html


def test_terminal_table_and_bad_reference(sweep_store: Path) -> None:
    res = headroom("report", "--store", str(sweep_store))
    assert res.returncode == 0, res.stderr
    assert "1x-strict" in res.stdout and "calibration" in res.stdout
    bad = headroom("report", "--store", str(sweep_store), "--reference", "5x")
    assert bad.returncode == 2 and "--reference" in bad.stderr and "Traceback" not in bad.stderr
    assert (
        headroom("report", "--store", str(sweep_store), "--reference", "unbounded", "--format", "json").returncode == 0
    )


def test_compare_two_runs(sweep_store: Path) -> None:
    res = headroom("runs", "compare", str(sweep_store), str(sweep_store), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    items = doc["statistics"]["comparisons"]["items"]
    assert len(items) == 3 and all(it["score"]["diff"] == 0 for it in items)
    assert doc["tasks_with_different_content"] == []
