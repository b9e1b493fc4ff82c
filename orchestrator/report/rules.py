"""The report's "Scores under named rules" section: each configuration under each rule, side by side.

Reads ``statistics.scoring_rules`` (orchestrator.stats.scoring_rules). Every score is labelled with
its rule, and every interval or stderr with what it generalises to (these tasks, or new tasks).
The trials that a rule counts differently from headroom's headline are listed by reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator.report.tables import print_table
from orchestrator.report.text import pct
from orchestrator.stats.glossary import SCORE_FAIL, runs_phrase

if TYPE_CHECKING:
    from orchestrator.report.blocks import ComparisonRules
    from orchestrator.report.model import ComparisonDocument, ReportDocument
    from orchestrator.spec.analysis import RuleResult, ScoringRules

MAX_RUNS_LISTED = 12
LEADERBOARD = "terminal-bench:leaderboard"


def _interval(res: RuleResult | None, short: bool = False) -> str:
    """Each interval or stderr with what it generalises to; ``short`` (the terminal): only the gist of that
    ("these tasks: another attempt at each"), one interval a line."""
    parts = []
    for iv in res.intervals if res else []:
        to = iv.generalises_to.split(" (", 1)[0] if short else iv.generalises_to
        if iv.kind == "wilson95" and iv.low is not None and iv.high is not None:
            parts.append(f"Wilson 95% [{100 * iv.low:.1f}, {100 * iv.high:.1f}] ({to})")
        elif iv.kind == "clustered_se" and iv.se is not None:
            parts.append(f"SE clustered by task {100 * iv.se:.2f} pts ({to})")
        elif iv.kind == "stderr":
            if iv.se is None:
                parts.append(f"no stderr ({(res.stderr_note if res else None) or 'one run'})")
            else:
                ci = f", ci95 ±{100 * iv.ci95:.2f} pts" if iv.ci95 is not None else ""
                parts.append(f"stderr {100 * iv.se:.2f} pts{ci} ({to})")
    return ("\n" if short else "; ").join(parts) or "none published"


def _counted(res: RuleResult | None) -> str:
    if res is None:
        return "0"
    left = res.excluded_by or {}
    text = str(res.n_trials)
    if left:
        text += f" ({sum(left.values())} left out: " + ", ".join(f"{k} {v}" for k, v in left.items()) + ")"
    if res.n_runs is not None:
        text += f"; {runs_phrase(res.n_runs, res.run_basis or 'source runs')}"
    return text


def _pass_at_k(res: RuleResult | None) -> str:
    """pass@k as the rule gives it; the leaderboard rule's configuration-level figure pools its runs (each run
    publishes its own, listed run by run), and says so."""
    pak = (res.pass_at_k if res else None) or {}
    text = ", ".join(f"pass@{k} {pct(v, 2)}" for k, v in pak.items() if v is not None)
    if text and res is not None and res.pass_at_k_basis and (res.n_runs or 0) > 1:
        text = f"pooled over {runs_phrase(res.n_runs or 0, res.run_basis or 'source runs')}: {text}"
    return text or "—"


def _title(sr: ScoringRules, rule: str, headline: str) -> str:
    title = sr.title(rule)
    return f"**{title}** (headline)" if rule == headline else title


def ordered_rules(sr: ScoringRules, headline: str) -> list[str]:
    """The headline rule first, then the others as requested."""
    return [headline] + [r for r in sr.requested if r != headline]


def rows(sr: ScoringRules, headline: str, bold: bool = True) -> list[list[str]]:
    """One row per configuration and rule; ``bold=False`` (the terminal): plain titles, compact intervals."""
    out = []
    for label, by_rule in sr.configs.items():
        for i, rule in enumerate(ordered_rules(sr, headline)):
            res = by_rule.get(rule)
            title = _title(sr, rule, headline) if bold else _title(sr, rule, headline).replace("**", "")
            out.append(
                [
                    label if i == 0 else "",
                    title,
                    pct(res.estimate if res else None, 2),
                    _interval(res, short=not bold),
                    _counted(res),
                    _pass_at_k(res),
                ]
            )
    return out


HEADERS = ["configuration", "rule", "score", "interval or stderr (what it generalises to)", "trials counted", "pass@k"]


def _short(names: list[str]) -> list[str]:
    """Run names without the path they share (a submission's runs differ only in their last part)."""
    if len(names) < 2:
        return [n.rsplit("/", 1)[-1] for n in names]
    parts = [n.split("/") for n in names]
    common = 0
    while all(len(p) > common + 1 and p[common] == parts[0][common] for p in parts):
        common += 1
    return ["/".join(p[common:]) for p in parts]


def _table(headers: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in body]  # cells escaped at the renderer's boundary (safe.py)
    return lines + [""]


def _rules(doc: ReportDocument) -> ScoringRules | None:
    return doc.statistics.scoring_rules if doc.statistics else None


def leads(doc: ReportDocument) -> bool:
    """Whether the run's headline is a source's own rule (an import): its section then opens the metrics."""
    return is_source_rule(doc.headline_rule)


def beyond_headroom(doc: ReportDocument) -> bool:
    """The run is shown under some rule besides headroom's two (an import's, or one asked for with --rules)."""
    sr = _rules(doc)
    return sr is not None and any(is_source_rule(r) for r in sr.requested)


def is_source_rule(rule: str) -> bool:
    """A benchmark's published rule (an import's own), not one of headroom's."""
    return not rule.startswith("headroom:")


PER_RUN_HEADERS = ["configuration", "run", "trials", "accuracy", "pass@k (within the run)"]


def per_run_rows(sr: ScoringRules) -> list[list[str]]:
    """The leaderboard rule run by run: each run's accuracy and pass@k as its own results.json reports them."""
    out = []
    for label, by_rule in sr.configs.items():
        res = by_rule.get(LEADERBOARD)
        runs = ((res.per_run if res else None) or [])[:MAX_RUNS_LISTED]
        for r, name in zip(runs, _short([r.run for r in runs])):
            out.append(
                [
                    label,
                    name,
                    str(r.n),
                    pct(r.accuracy, 2),
                    ", ".join(f"pass@{k} {pct(v, 2)}" for k, v in r.pass_at_k.items() if v is not None) or "—",
                ]
            )
    return out


def per_run_title(sr: ScoringRules) -> str:
    return (
        "Terminal-Bench leaderboard rule, run by run (the accuracy and pass@k each run's results.json "
        f"reports; runs are {sr.run_basis})"
    )


def markdown(doc: ReportDocument) -> list[str]:
    sr = _rules(doc)
    if sr is None or not sr.configs:
        return []
    headline = doc.headline_rule
    own = is_source_rule(headline)
    lines = [
        "## Scores under named rules",
        "",
        f"A score is a rule applied to trials. Headline for this run: **{sr.title(headline)}** "
        f"(`{headline}`)"
        + (
            " — the source's own rule, which reproduces the numbers it published; "
            "headroom's stricter reading is beside it, and the Metrics below are "
            "headroom's."
            if own
            else "."
        )
        + " Each interval says what it generalises to: *these tasks* (another attempt or run on the same "
        "tasks) or *new tasks like these*.",
        "",
    ]
    lines += _table(HEADERS, rows(sr, headline))
    moved = [
        [label, sr.title(rule), m.reason, str(m.trials), m.effect]
        for label, by_rule in sr.moves.items()
        for rule, ms in by_rule.items()
        for m in ms
    ]
    if moved:
        lines += [f"Trials each rule counts differently from {SCORE_FAIL}, by reason:", ""]
        lines += _table(["configuration", "rule", "reason", "trials", "effect"], moved)
    per_run = per_run_rows(sr)
    if per_run:
        lines += [per_run_title(sr) + ":", ""]
        lines += _table(PER_RUN_HEADERS, per_run)
    lines += ["Rules:", ""]
    for name, d in sr.definitions.items():
        lines.append(f"- `{name}` — {d.title}: counts {d.counts}; {d.aggregate}; {d.interval}. Source: {d.source}.")
    return lines + [""]


def print_terminal(doc: ReportDocument, console: Console) -> None:
    sr = _rules(doc)
    if sr is None or not sr.configs:
        return
    headline = doc.headline_rule
    body = rows(sr, headline, bold=False)  # the document was escaped for the terminal (safe.py)
    print_table(
        console,
        f"Scores under named rules (headline: {sr.title(headline)}; each interval says what it generalises to)",
        HEADERS,
        body,
        keep=2,
        right=[2],
        wrap=[3, 4, 5],
    )
    # What moves under each benchmark rule, one line per configuration and rule (headroom's infra-excluded
    # rule leaves out what the Exclusions list; Markdown and the JSON have every move with its effect).
    lines = [
        f"  {label} — {sr.title(rule)}: " + "; ".join(f"{m.trials} {m.reason}" for m in ms)
        for label, by_rule in sr.moves.items()
        for rule, ms in by_rule.items()
        if ms and is_source_rule(rule)
    ]
    if lines:
        console.print(f"Trials each benchmark rule counts differently from {SCORE_FAIL}, by reason:")
        for line in lines:
            console.print(line)
    per_run = per_run_rows(sr)
    if per_run:
        print_table(console, per_run_title(sr), PER_RUN_HEADERS, per_run, right=[2, 3])


def spread_columns(sr: ScoringRules | None, labels: list[str]) -> tuple[list[str], list[list[str]]]:
    """Extra spread columns under the leaderboard rule (the run accuracies a submission reports), when shown."""
    if sr is None or LEADERBOARD not in sr.requested:
        return [], [[] for _ in labels]
    cells = []
    for lab in labels:
        res = sr.result(lab, LEADERBOARD)
        spread = res.run_spread if res else None
        cells.append(["—", "— .. —"] if spread is None else [pct(spread.sd), f"{pct(spread.min)} .. {pct(spread.max)}"])
    return ["SD (leaderboard rule)", "range (leaderboard rule)"], cells


def comparison_rows(sr: ComparisonRules, short: bool = False) -> list[list[str]]:
    """Per shared configuration label and rule: A, B and B − A (each run scored on the tasks both hold);
    ``short`` (the terminal): compact intervals, one a line."""
    a, b = sr.A, sr.B
    out = []
    labels_b = list(b.configs)
    for label_a, by_a in a.configs.items():
        label_b = (
            label_a if label_a in labels_b else (labels_b[0] if len(labels_b) == 1 and len(a.configs) == 1 else None)
        )
        if label_b is None:
            continue
        for rule in sr.requested:
            ra, rb = by_a.get(rule), b.configs[label_b].get(rule)
            if ra is None and rb is None:
                continue
            ea, eb = (ra.estimate if ra else None), (rb.estimate if rb else None)
            diff = None if ea is None or eb is None else eb - ea
            out.append(
                [
                    f"{label_a} vs {label_b}",
                    a.title(rule) if rule in a.definitions else b.title(rule),
                    pct(ea, 2),
                    pct(eb, 2),
                    "—" if diff is None else f"{100 * diff:+.2f} pts",
                    _interval(ra, short),
                    _interval(rb, short),
                ]
            )
    return out


COMPARISON_HEADERS = [
    "configurations",
    "rule",
    "A",
    "B",
    "B − A",
    "A: interval (generalises to)",
    "B: interval (generalises to)",
]


def comparison_markdown(doc: ComparisonDocument) -> list[str]:
    sr = doc.statistics.scoring_rules
    if sr is None:
        return []
    body = comparison_rows(sr)
    if not body:
        return []
    return [
        "",
        "## Scores under named rules",
        "",
        f"Each run scored on the tasks both hold ({sr.basis}); "
        f"headline rules: A {sr.default['A']}, B {sr.default['B']}.",
        "",
    ] + _table(COMPARISON_HEADERS, body)
