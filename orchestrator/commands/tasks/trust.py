"""``headroom tasks audit|provenance|judge``: how far a task set and its grading can be trusted (``runs regrade``: runs/regrade.py)."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import click

from orchestrator.commands.console import err
from orchestrator.commands.options import format_option, output_option
from orchestrator.commands.outputs import check_file, write_file


@click.command("audit")
@click.argument("tasks_dir", type=click.Path(path_type=Path))
@click.option(
    "--against",
    multiple=True,
    type=click.Path(path_type=Path),
    help="train/dev file (CSV, TSV or JSONL) to check the tasks against; repeatable",
)
@click.option("--id-column", default="id", show_default=True, help="id column of --against files")
@click.option("--text-column", default="text", show_default=True, help="text column of --against files")
@click.option(
    "--field",
    "fields",
    type=click.Choice(["prompt", "prompt+answer", "both"]),
    default="both",
    show_default=True,
    help="compare the prompt alone, prompt plus reference answer, or both",
)
@click.option(
    "--threshold",
    type=float,
    default=0.8,
    show_default=True,
    help="near-duplicate Jaccard similarity of word 3-shingles",
)
@click.option(
    "--accept-clusters", "accept", is_flag=True, help="write the proposed template clusters into each task's cluster_id"
)
@output_option("write the JSON lines to this file instead of stdout")
def audit_cmd(
    tasks_dir: Path,
    against: tuple[Path, ...],
    id_column: str,
    text_column: str,
    fields: str,
    threshold: float,
    accept: bool,
    output: Path | None,
) -> None:
    """Find exact and near-duplicate tasks, within the set and against train/dev files (one JSON line per finding)."""
    if output is not None:
        check_file(output, "--output")
    from orchestrator.tasks.loader import load_tasks  # the task models load when the command runs
    from orchestrator.trust.texts import file_items

    tasks = load_tasks(tasks_dir)
    refs = [it for path in against for it in file_items(path, id_column, text_column)]
    chosen = ["prompt", "prompt+answer"] if fields == "both" else [fields]
    with err.status(f"auditing {len(tasks)} tasks against {len(refs)} reference texts"):
        from orchestrator.trust import audit as audit_mod  # numpy and MinHash: only when auditing

        result = audit_mod.audit(tasks, refs, chosen, threshold)  # type: ignore[arg-type]
    lines = [json.dumps(r, sort_keys=True) for r in result.records()]
    if output:
        write_file(output, "".join(f"{line}\n" for line in lines), "--output")
    else:
        for line in lines:
            click.echo(line)
    kinds = {k: sum(1 for f in result.findings if f.type == k) for k in ("exact", "near")}
    err.print(
        f"{kinds['exact']} exact and {kinds['near']} near-duplicate pairs; "
        f"{len(result.clusters)} proposed template clusters"
    )
    if accept and result.clusters:
        changed = audit_mod.accept_clusters(tasks, result.clusters)
        err.print(f"cluster_id written into {len(changed)} task.toml files")


@click.command("provenance")
@click.argument("tasks_dir", type=click.Path(path_type=Path))
@format_option(("csv", "json"), default="csv")
def provenance_cmd(tasks_dir: Path, fmt: str) -> None:
    """Export every task's [provenance] fields, with the fields each task is missing."""
    from orchestrator.tasks.loader import load_tasks
    from orchestrator.trust.provenance import FIELDS, registry

    rows = registry(load_tasks(tasks_dir))
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=["task_id", *FIELDS, "paraphrase_of", "access_class", "missing"], lineterminator="\n"
    )
    writer.writeheader()
    for r in rows:
        writer.writerow({**r, "missing": ";".join(r["missing"])})
    sys.stdout.write(buf.getvalue())


@click.group("judge")
def judge_group() -> None:
    """LLM-judge graders: calibrate a judge before trusting its grades."""


@judge_group.command("calibrate")
@click.argument("pairs_file", type=click.Path(path_type=Path))
@click.option("--endpoint", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
@click.option("--model", required=True, help="the judge model's name at that endpoint")
@click.option(
    "--api-key-env", help="NAME of the environment variable holding the API key (its value is never recorded)"
)
@output_option("write the JSON report to this file instead of stdout")
def judge_calibrate(pairs_file: Path, endpoint: str, model: str, api_key_env: str | None, output: Path | None) -> None:
    """Judge every pair in both orders: order consistency, position bias, agreement with human labels (Cohen's kappa), length bias.

    PAIRS_FILE is JSONL: {"id", "prompt", "response_a", "response_b", "human": "a"|"b"|null}.
    """
    from orchestrator.trust.judge import Judge, calibrate, judge_pairs, load_pairs, write_report

    if output is not None:
        check_file(output, "--output")
    pairs = load_pairs(pairs_file)
    judge = Judge(endpoint, model, api_key_env)
    with err.status(f"judging {len(pairs)} pairs in both orders"):
        judged = judge_pairs(judge, pairs)
    text = write_report({"endpoint": endpoint, "model": model, "calls": judge.calls, **calibrate(judged)}, None)
    if output is not None:
        write_file(output, text + "\n", "--output")
        err.print(f"judge calibration written to {output} (json)")
    else:
        click.echo(text)
