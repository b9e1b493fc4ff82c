"""``headroom results import``: Harbor jobs and Terminal-Bench runs into the store, as first-class runs.

The summary accounts for every file read: per source, the trials read, imported, duplicates
(of which file) and skipped (why); the skipped files and trials with their reasons; each
configuration's score under the source's own rule beside headroom's, with the trials that move
between the two by reason. Anything skipped for a reason other than an exact duplicate makes
the import refuse to write (exit 1) unless ``--allow-partial`` is given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from orchestrator.commands.console import err, out
from orchestrator.commands.options import format_option, store_option
from orchestrator.importers.outcomes import parse_overrides, refuse_unknown_types
from orchestrator.report.outcomes import OUTCOME_HEADERS, count_cells
from orchestrator.report.text import pct

MAX_LISTED = 20  # lines of a list the terminal shows before "and N more" (the JSON summary has them all)


def _checks_cell(checks: list[dict[str, Any]]) -> str:
    if not checks:
        return "—"
    acc = next((c for c in checks if c["reported_as"].startswith(("accuracy", "mean reward"))), checks[0])
    bad = [c for c in checks if c["agrees"] is False]
    mark = "[red]DISAGREES[/]" if bad else ("[green]agrees[/]" if all(c["agrees"] for c in checks) else "—")
    return f"{pct(acc['reported'], 2)} / {pct(acc['recomputed'], 2)} {mark} ({len(checks)})"


def _more(items: list[Any], shown: int = MAX_LISTED) -> str:
    return f"  … and {len(items) - shown} more (see --format json)" if len(items) > shown else ""


def print_summary(summary: dict[str, Any], run_id: str | None, store: Path) -> None:
    tot = summary["totals"]
    out.print(
        f"[bold]{tot['sources']} source(s)[/] in {tot['configurations']} configuration(s); {tot['files_read']} "
        f"files read; {tot['trials_read']} trial entries: {tot['trials_imported']} imported, "
        f"{tot['trials_duplicate']} duplicate, {tot['trials_skipped']} skipped; {tot['files_skipped']} file(s) "
        "skipped",
        soft_wrap=True,
    )
    t = Table(
        title="Sources (own score / recomputed by its own rule, and how many of its numbers were checked)",
        title_justify="left",
    )
    for h in (
        "configuration",
        "source (in its submission)",
        "harness",
        "files",
        "trials",
        "imported",
        "duplicate",
        "skipped",
        "own score / recomputed",
    ):
        t.add_column(
            h,
            overflow="fold",
            justify="left" if not h.startswith(("files", "trials", "imported", "dup", "skip")) else "right",
        )
    last = None
    for s in summary["sources"]:
        skipped = s["trials_skipped"] + s["files_skipped"]
        config = s["configuration"] or "—"
        t.add_row(
            escape(config) if config != last else "",
            escape(s["details"].get("within_submission") or s["name"]),
            escape(f"{s['harness']} {(s['harness_version'] or '(version unrecorded)')[:20]}"),
            str(s["files_read"]),
            str(s["trials_read"]),
            str(s["trials_imported"]),
            str(s["trials_duplicate"]),
            f"[red]{skipped}[/]" if skipped else "0",
            _checks_cell(s["accuracy_checks"]),
        )
        last = config
    t.add_row(
        "[bold]total[/]",
        f"{tot['sources']} sources",
        "",
        str(tot["files_read"]),
        str(tot["trials_read"]),
        str(tot["trials_imported"]),
        str(tot["trials_duplicate"]),
        str(tot["trials_skipped"] + tot["files_skipped"]),
        "",
    )
    out.print(t)
    for s in summary["sources"]:
        for c in s["accuracy_checks"]:
            if c["agrees"] is False:
                out.print(
                    f"  [red]disagrees[/] {escape(s['name'])}: {escape(c['reported_as'])} reported "
                    f"{c['reported']!r}, recomputed {c['recomputed']!r} ({escape(s['source_rule'])})",
                    soft_wrap=True,
                )
    if summary["skipped"]:
        t = Table(title="Skipped (not imported), by reason", title_justify="left")
        for h in ("reason", "trials or files", "e.g."):
            t.add_column(h, overflow="fold")
        for reason, n in summary["skip_reasons"].items():
            example = next(x["file"] for x in summary["skipped"] if x["reason"] == reason)
            t.add_row(escape(str(reason)), str(n), escape(example))
        out.print(t)
    dups = summary["duplicates"]
    within = [d for d in dups if d["source"] == d["duplicate_of_source"]]
    across = [d for d in dups if d["source"] != d["duplicate_of_source"]]
    if within:
        out.print(
            f"{sum(d['trials'] for d in within)} trial(s) in {sum(d['files'] for d in within)} file(s) repeat a "
            f"trial of their own source (per-trial copies of results.json, same id): counted once, in "
            f"{len(within)} source(s).",
            soft_wrap=True,
        )
    for d in across[:MAX_LISTED]:
        out.print(
            f"[yellow]duplicate[/]: {d['trials']} trial(s) of {escape(d['source'])} have the same id as trials of "
            f"{escape(d['duplicate_of_source'])} (e.g. {escape(d['examples'][0]['file'])}): counted once",
            soft_wrap=True,
        )
    if across:
        out.print(_more(across))
    for prob in summary["problems"][:MAX_LISTED]:
        out.print(f"[yellow]note[/] {escape(prob)}", soft_wrap=True)
    if summary["problems"]:
        out.print(_more(summary["problems"]))
    if summary["unmapped"]:
        out.print(
            "[bold yellow]unmapped[/] (counted as harness_error(orchestrator_error); map with "
            "--map TYPE=OUTCOME[:REASON]): " + ", ".join(f"{escape(k)} ×{v}" for k, v in summary["unmapped"].items()),
            soft_wrap=True,
        )
    t = Table(title="Mapping rules applied (trials)", title_justify="left")
    t.add_column("rule", overflow="fold")
    t.add_column("trials", justify="right")
    for rule, n in summary["rules"].items():
        t.add_row(escape(rule), str(n))
    out.print(t)
    t = Table(
        title="Configurations (in this order): the source's own rule beside headroom's headline", title_justify="left"
    )
    for h in ("label", "sources", "trials", *OUTCOME_HEADERS.values(), "own rule", "headroom (infra = fail)"):
        t.add_column(h, overflow="fold", justify="left" if h == "label" else "right")
    for c in summary["configurations"]:
        t.add_row(
            escape(c["label"]),
            str(len(c["sources"])),
            str(c["trials"]),
            *count_cells(c["outcomes"]),
            pct(c["source_rule_score"], 2),
            pct(c["headline"], 2),
        )
    out.print(t)
    for c in summary["configurations"]:
        for reason, n in c.get("inferred", {}).items():
            out.print(
                f"[yellow]inferred[/] {escape(c['label'])}: {n} trial(s) infra_error({escape(reason)}): the agent step "
                "was SIGKILLed and the source scored it a failure; not proven an OOM kill (each trial's evidence names "
                "the files); the report shows the score with them as failures and as infra errors",
                soft_wrap=True,
            )
    _print_merges(summary.get("merges", []))
    _print_held(summary.get("already_imported", []))
    by_rule: dict[str, int] = {}
    for c in summary["configurations"]:
        by_rule[c["source_rule"]] = by_rule.get(c["source_rule"], 0) + 1
    out.print(
        "own rule: "
        + "; ".join(f"{r} ({n} configuration(s))" for r, n in by_rule.items())
        + ". headroom report shows each under every rule, with what its interval generalises to.",
        soft_wrap=True,
    )
    for c in summary["configurations"]:
        for m in c["moves"][:MAX_LISTED]:
            out.print(
                f"  {escape(c['label'])}: {m['trials']} {escape(m['reason'])} ({escape(m['effect'])})", soft_wrap=True
            )
    if run_id:
        nxt = f"headroom report {store}:{run_id}" if "," not in run_id else f"headroom runs --store {store}"
        out.print(f"run {run_id} written to {store}. Next: {nxt}")


def _not_yet_imported(sources: list[Any], store_path: Path) -> tuple[list[Any], list[dict[str, Any]]]:
    """The sources the store does not hold yet, and one record per source it already holds (same content)."""
    from orchestrator.store.sqlite import Store

    if not store_path.is_file():
        return sources, []
    with Store.open_existing(store_path) as store:
        held = {h["digest"]: h for h in store.imported_sources()}
    fresh, skipped = [], []
    for s in sources:
        h = held.get(s.digest) if s.files_sha256 else None
        if h is None:
            fresh.append(s)
        else:
            skipped.append(
                {
                    "source": s.name,
                    "digest": s.digest,
                    "run_id": h["run_id"],
                    "run_name": h["run_name"],
                    "imported_as": h["source"],
                    "imported_at": h["imported_at"],
                }
            )
    return fresh, skipped


def _print_held(held: list[dict[str, Any]]) -> None:
    """One line per run of the store that already holds sources of this import (the same content)."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for h in held:
        by_run.setdefault(h["run_id"], []).append(h)
    for run_id, hs in list(by_run.items())[:MAX_LISTED]:
        first = hs[0]
        what = escape(first["source"]) if len(hs) == 1 else f"{len(hs)} sources (e.g. {escape(first['source'])})"
        out.print(
            f"[yellow]already imported[/]: {what}: the same content is in run {escape(run_id)} "
            f"({escape(str(first['run_name']))}, imported {escape(str(first['imported_at']))}); skipped, --again "
            "imports it once more",
            soft_wrap=True,
        )
    if len(by_run) > MAX_LISTED:
        out.print(_more(list(by_run)))


def _print_merges(merges: list[dict[str, Any]]) -> None:
    for m in merges:
        out.print(
            f"[bold yellow]merged on request[/] ({escape(m['how'])}): {escape(m['label'])} is one configuration of "
            f"{len(m['submissions'])} submissions ({escape(', '.join(m['submissions']))}; "
            f"{len(m['sources'])} source runs)",
            soft_wrap=True,
        )


@click.group("results", short_help="results made elsewhere: import Harbor and Terminal-Bench runs")
def results() -> None:
    """Bring results produced elsewhere (Harbor jobs, Terminal-Bench runs) into a headroom store."""


@results.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@store_option()
@click.option("--name", help="run name (default: the first source's directory name)")
@click.option(
    "--label",
    "labels",
    multiple=True,
    help="configuration label, one per configuration in the order the summary lists them (default: "
    "agent@model, or the submission's folder name); the same label twice merges those configurations",
)
@click.option(
    "--map",
    "mappings",
    multiple=True,
    metavar="TYPE=OUTCOME[:REASON]",
    help="map a Harbor exception type or Terminal-Bench failure mode (repeatable)",
)
@click.option("--reward-threshold", type=float, default=1.0, show_default=True, help="a reward at or above this passes")
@click.option("--separate", is_flag=True, help="one run per configuration instead of one run holding them all")
@click.option(
    "--merge",
    is_flag=True,
    help="join configurations of different submissions that name the same agent and the same model "
    "(sources that record no model are never joined this way); each join is printed",
)
@click.option(
    "--again",
    is_flag=True,
    help="import sources the store already holds (same content) once more, instead of skipping them",
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="import even when files or trials were skipped (for a reason other than an exact duplicate)",
)
@format_option(("table", "json"))
@click.pass_context
def import_(
    ctx: click.Context,
    paths: tuple[Path, ...],
    store_path: Path,
    name: str | None,
    labels: tuple[str, ...],
    mappings: tuple[str, ...],
    reward_threshold: float,
    separate: bool,
    merge: bool,
    again: bool,
    allow_partial: bool,
    fmt: str,
) -> None:
    """Import Harbor job directories and Terminal-Bench runs found under PATHS (at any depth) as a run whose
    configurations are the submissions found, in order."""
    from orchestrator.importers import results as importer  # the scoring rules' statistics: only when importing
    from orchestrator.store.sqlite import Store

    overrides = parse_overrides(mappings)
    sources, stray = importer.read_sources(list(paths), threshold=reward_threshold, overrides=overrides)
    refuse_unknown_types(overrides, {t.source_error for src in sources for t in src.trials if t.source_error})
    sources, held = (sources, []) if again else _not_yet_imported(sources, store_path)
    if not sources:
        if fmt == "json":
            nothing = {"already_imported": held, "nothing_new": True}
            click.echo(json.dumps([{"run_id": None, **nothing, "summary": nothing}], indent=2, default=str))
        else:
            _print_held(held)
            out.print("nothing new to import (--again imports them once more)")
        return
    whole = importer.plan(sources, threshold=reward_threshold, labels=list(labels) or None, stray=stray, merge=merge)
    summary = whole.summary()
    summary["already_imported"] = held
    if whole.partial and not allow_partial:
        if fmt == "json":
            click.echo(json.dumps([{"run_id": None, "summary": summary}], indent=2, default=str))
        else:
            print_summary(summary, None, store_path)
        err.print(
            f"[bold red]nothing imported[/]: {summary['totals']['files_skipped']} file(s) and "
            f"{summary['totals']['trials_skipped']} trial(s) were skipped (reasons above). Fix them, or pass "
            "--allow-partial to import the rest.",
            soft_wrap=True,
        )
        ctx.exit(1)
    plans = (
        [
            importer.ImportPlan(
                [s for s in whole.sources if s in c.sources], [c], whole.stray if i == 0 else [], whole.threshold
            )
            for i, c in enumerate(whole.configurations)
        ]
        if separate
        else [whole]
    )
    done: list[dict[str, Any]] = []
    written: set[str] = set()  # sources this import wrote (with --separate a job of two agents is in two runs)
    with Store(store_path) as store:
        for p in plans:
            run_name = name or (p.configurations[0].label if separate else Path(paths[0]).resolve().name)
            run, tasks, trials = importer.records(p, name=run_name)
            fresh = [] if again else [s.digest for s in p.sources if s.files_sha256 and s.digest not in written]
            run_id = store.import_run(run, tasks, trials, new_sources=fresh)
            written.update(s.digest for s in p.sources)
            done.append(
                {"run_id": run_id, "summary": {**p.summary(), "already_imported": held} if separate else summary}
            )
    if fmt == "json":
        click.echo(json.dumps(done, indent=2, default=str))
    else:
        print_summary(summary, ", ".join(d["run_id"] for d in done), store_path)
        err.print(f"{len(done)} run(s) imported" + (" (partial: see the skipped files above)" if whole.partial else ""))
