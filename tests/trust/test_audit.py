"""Duplicate audit on task sets and reference files written by the test."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.tasks.loader import load_tasks
from orchestrator.trust.audit import accept_clusters, audit
from orchestrator.trust.duplicates import all_pairs_near
from orchestrator.trust.texts import Item, file_items, normalize
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task

BASE = (
    "Write a program that reads the access log in /app/logs and prints the ten most frequent client "
    "addresses with their request counts sorted by count then address, one per line, to /app/out.txt"
)


def _task(root: Path, name: str, instruction: str, solve: str = "true\n") -> None:
    write_task(root, name, solve=solve)
    (root / name / "instruction.md").write_text(instruction)


def test_normalization_is_nfkc_case_punctuation_and_space() -> None:
    assert normalize("Ｈello,  WORLD!\n\tit's") == "hello world it s"
    assert normalize("ﬁle") == "file"  # NFKC folds the ligature


def test_exact_near_and_unrelated_tasks_are_told_apart(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _task(root, "orig", BASE)
    _task(root, "same", BASE.upper().replace(",", " ,") + "!")  # exact after normalization
    _task(root, "para", BASE.replace("ten most frequent", "ten most common"))  # near
    _task(root, "other", "Compute the SHA-256 of every file under /data and write a manifest to /app/manifest.json")
    result = audit(load_tasks(root), [], ["prompt"], 0.7)
    pairs = {(f.type, tuple(sorted(f.ids))) for f in result.findings}
    assert ("exact", ("orig", "same")) in pairs
    assert ("near", ("orig", "para")) in pairs and ("near", ("para", "same")) in pairs
    assert not any("other" in ids for _, ids in pairs)
    near = [f for f in result.findings if f.type == "near"]
    assert all(0.7 <= f.similarity < 1 for f in near)
    assert result.clusters == [{"cluster_id": "orig", "members": ["orig", "para", "same"]}]


def test_prompt_plus_answer_separates_tasks_with_the_same_prompt_but_different_answers(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _task(root, "a", BASE, solve="sort | uniq -c | sort -rn | head -10 > /app/out.txt\n" * 3)
    _task(
        root,
        "b",
        BASE,
        solve="python3 -c 'import collections, sys; print(collections.Counter(sys.stdin).most_common(10))'\n" * 3,
    )
    result = audit(load_tasks(root), [], ["prompt", "prompt+answer"], 0.9)
    by_field = {f.field for f in result.findings}
    assert by_field == {"prompt"}  # identical prompts, but the answers differ enough


def test_against_reference_files_csv_and_jsonl(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _task(root, "leaked", BASE)
    _task(root, "clean", "Implement a lock-free ring buffer in C with a test harness under /app/ring")
    train = tmp_path / "train.jsonl"
    train.write_text(
        json.dumps({"qid": "t-17", "body": BASE.replace("ten", "10")})
        + "\n"
        + json.dumps({"qid": "t-18", "body": "totally unrelated text about cooking pasta al dente"})
        + "\n"
    )
    dev = tmp_path / "dev.csv"
    dev.write_text('qid,body\nd-1,"' + BASE + '"\n')
    refs = file_items(train, "qid", "body") + file_items(dev, "qid", "body")
    result = audit(load_tasks(root), refs, ["prompt"], 0.6)
    external = {(f.type, f.ids, f.reference) for f in result.findings if f.scope == "external"}
    assert external == {("near", ("leaked", "t-17"), "train.jsonl"), ("exact", ("leaked", "d-1"), "dev.csv")}


def test_lsh_finds_what_all_pairs_finds_on_a_sample(tmp_path: Path) -> None:
    import random

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(3000)]
    items = [Item(f"i{n}", " ".join(rng.choice(vocab) for _ in range(60)), "tasks") for n in range(150)]
    refs = []
    for n in range(300):
        if n % 10 == 0:  # planted: a copy of an item with 3 of 60 words changed
            words = items[n // 10].text.split()
            for k in rng.sample(range(60), 3):
                words[k] = rng.choice(vocab)
            refs.append(Item(f"r{n}", " ".join(words), "train"))
        else:
            refs.append(Item(f"r{n}", " ".join(rng.choice(vocab) for _ in range(60)), "train"))
    from orchestrator.trust.duplicates import near_duplicates

    found = {f.ids for f in near_duplicates(items, refs, "prompt", 0.5)}
    truth = all_pairs_near(items, refs, 0.5)
    assert len(truth) == 30
    assert found <= truth | {f for f in found if f in truth}  # no false positive survives the exact check
    assert len(found & truth) >= 28  # LSH recall on planted near-duplicates


def test_accepted_clusters_are_written_and_feed_cluster_ids(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _task(root, "orig", BASE)
    _task(root, "para", BASE.replace("ten most frequent", "ten most common"))
    tasks = load_tasks(root)
    result = audit(tasks, [], ["prompt"], 0.7)
    assert accept_clusters(tasks, result.clusters) == ["orig", "para"]
    reloaded = {t.id: t.cluster_id for t in load_tasks(root)}
    assert reloaded == {"orig": "orig", "para": "orig"}


def test_cli_writes_one_json_record_per_finding_and_bad_files_are_one_line_errors(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _task(root, "orig", BASE)
    _task(root, "same", BASE + " ")
    proc = run_cli("tasks", "audit", str(root), "--field", "prompt", timeout=None)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {r["type"] for r in records} == {"exact", "proposed_cluster"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    proc = run_cli("tasks", "audit", str(root), "--against", str(bad), timeout=None)
    assert proc.returncode == 2 and "line 1: not JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_provenance_export_lists_missing_fields(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _task(root, "a", BASE)
    proc = run_cli("tasks", "provenance", str(root), "--format", "json", timeout=None)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert rows[0]["task_id"] == "a" and "created_at" in rows[0]["missing"] and rows[0]["access_class"] == "unknown"
    bundled = run_cli("tasks", "provenance", "tasks", cwd=Path(__file__).resolve().parents[2], timeout=None)
    assert bundled.returncode == 0 and bundled.stdout.count("\n") == 11 and ",public," in bundled.stdout
