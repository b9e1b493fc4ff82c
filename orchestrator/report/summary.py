"""The summary every report format opens with: the headline per configuration, the recommendation, isolation.

One layout-free description (headers, rows and lines) that the terminal, Markdown, HTML and viewer renderers
lay out, so the first screen of every format says the same thing in the same words. Nothing is computed here
that the report document does not already hold.

One headline per run (``ReportDocument.headline_rule``). For a run headroom made it is headroom's rule: the
score with its these-tasks and new-tasks intervals (``score_intervals``). For an imported submission it is the
source's own rule, which reproduces the figure the source published (``statistics.scoring_rules``); headroom's
stricter reading stands beside it, and the trials that move between the two are counted by reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report import checks
from orchestrator.report.text import HEADLINE_HEADERS, headline_rows, pct, rate
from orchestrator.stats.glossary import SCORE_FAIL, trials_phrase

if TYPE_CHECKING:
    from orchestrator.report.model import Configuration, ReportDocument
    from orchestrator.spec.analysis import NewTasksInterval, RuleResult

INFRA_RATE = "infra-error rate"
#: The summary table of a run headroom made: the headline with its two intervals, then the infra-error rate.
HEADERS = [*HEADLINE_HEADERS, INFRA_RATE]

# What each half of the calibration's evidence generalises to (the tests named in CALIBRATION_RULE).
_GENERALISES = (
    "score evidence (paired t and TOST over tasks) generalises to new tasks; infra-error evidence "
    "(exact test over trials, stratified by task) to more attempts on these tasks"
)

#: The header of a source rule's own interval column: what that rule publishes, and what it generalises to.
_SOURCE_INTERVAL = {
    "terminal-bench:leaderboard": "stderr: another run of these tasks",
    "terminal-bench-2:official": "stderr: new trials of these tasks",
    "harbor:job-mean": "interval (the rule publishes none)",
}
#: How many reasons a configuration's moves list in the summary (the rules section lists them all).
MAX_REASONS = 4


def _new_tasks(c: Configuration) -> NewTasksInterval:
    return c.score_intervals.new_tasks


def new_tasks_basis(doc: ReportDocument) -> str | None:
    """``12 tasks, df 11`` when every configuration's new-tasks interval has the same basis (said once)."""
    bases = {(_new_tasks(c).n_tasks, _new_tasks(c).df) for c in doc.configurations}
    if len(bases) != 1:
        return None
    n, df = bases.pop()
    if n is None or df is None:  # one task: no t interval over tasks (see basis_line)
        return None
    return f"{n} tasks, df {df}"


def rule_title(doc: ReportDocument, rule: str) -> str:
    """A rule's title as the document's scoring block defines it (its name when the run has no trials)."""
    sr = doc.statistics.scoring_rules if doc.statistics else None
    return sr.title(rule) if sr else rule


def source_led(doc: ReportDocument) -> bool:
    """The headline is a source's own rule (an imported submission), not headroom's."""
    return (
        not doc.headline_rule.startswith("headroom:")
        and doc.statistics is not None
        and doc.statistics.scoring_rules is not None
    )


def headers(doc: ReportDocument) -> list[str]:
    if not source_led(doc):
        return HEADERS
    rule = doc.headline_rule
    return [
        "config",
        f"{rule_title(doc, rule)} (headline)",
        _SOURCE_INTERVAL.get(rule, "interval (what it generalises to)"),
        f"{SCORE_FAIL}, Wilson 95%: these tasks",
        HEADLINE_HEADERS[3],
        INFRA_RATE,
    ]


def _rule_result(doc: ReportDocument, label: str) -> RuleResult | None:
    sr = doc.statistics.scoring_rules if doc.statistics else None
    return sr.result(label, doc.headline_rule) if sr else None


def source_interval(res: RuleResult | None) -> str:
    """The headline rule's own interval: its stderr (with ci95 where the rule publishes one), or why there is none."""
    se = next((iv for iv in res.intervals if iv.kind == "stderr"), None) if res else None
    if res is None or se is None:
        return "none published"
    if se.se is None:
        return "— (" + ("one run" if res.n_runs == 1 else "a task with one counted trial") + ")"
    ci = f", ci95 ±{100 * se.ci95:.2f}" if se.ci95 is not None else ""
    return f"{100 * se.se:.2f} pts{ci}"


def rows(doc: ReportDocument) -> list[list[str]]:
    """One row per configuration, led by the headline.

    A run headroom made: label, headline score, its two intervals, infra-error rate (Wilson 95%); the
    new-tasks interval's basis (tasks, df) is in its cell only when it differs between configurations, otherwise
    :func:`lines` says it once. An import: label, the source rule's score (two decimals, as leaderboards publish)
    and its own interval, headroom's score with its Wilson interval and new-tasks interval, infra-error rate."""
    shared = new_tasks_basis(doc) is not None
    out = []
    for row, c in zip(headline_rows(doc.configurations), doc.configurations):
        if shared or row[3] == "—":
            row[3] = row[3].split(" (", 1)[0]
        if source_led(doc):
            res = _rule_result(doc, c.label)
            out.append(
                [
                    c.label,
                    pct(res.estimate if res else None, 2),
                    source_interval(res),
                    rate(c.score_infra_as_failure),
                    row[3],
                    rate(c.infra_error_rate),
                ]
            )
        else:
            out.append([*row, rate(c.infra_error_rate)])
    return out


def moves_lines(doc: ReportDocument) -> list[str]:
    """Per configuration, the trials the headline rule counts differently from headroom's reading, by reason."""
    if not source_led(doc):
        return []
    sr = doc.statistics.scoring_rules if doc.statistics else None
    rule = doc.headline_rule
    head = (
        f"Headline: {rule_title(doc, rule)}, the source's own rule (it reproduces the figure the source "
        f"published); beside it {SCORE_FAIL}, headroom's stricter reading. Trials that move between them:"
    )
    out = [head]
    for c in doc.configurations:
        ms = (sr.moves.get(c.label) or {}).get(rule) or [] if sr else []
        if not ms:
            out.append(f"  {c.label}: none (both count the same trials the same way).")
            continue
        parts = [f"{m.trials} {m.reason}" for m in ms[:MAX_REASONS]]
        more = sum(m.trials for m in ms[MAX_REASONS:])
        moved = sum(m.trials for m in ms)
        out.append(
            f"  {c.label}: {trials_phrase(moved)}: "
            + "; ".join(parts)
            + (f"; {more} more for other reasons (see Scores under named rules)" if more else "")
            + "."
        )
    return out


def basis_line(doc: ReportDocument) -> str | None:
    """What the new-tasks intervals stand on, said once; or why a configuration has none (too few tasks)."""
    basis = new_tasks_basis(doc)
    if basis:
        return f"New-tasks intervals: t over {basis}, SE clustered by task."
    few = [c for c in doc.configurations if _new_tasks(c).note]
    if few:
        which = "any configuration" if len(few) == len(doc.configurations) else ", ".join(c.label for c in few)
        notes = sorted({str(_new_tasks(c).note) for c in few})
        return (
            f"No new-tasks interval for {which}: {'; '.join(notes)}. "
            "The these-tasks interval claims only the tasks that ran."
        )
    return None


def recommendation(doc: ReportDocument) -> str:
    """The calibration's recommendation, or why there is none, with what it generalises to."""
    if doc.labels_axis:
        return (
            "No recommendation: the configurations are labels (agents, models), not resource levels, so there "
            "is no limit to choose; the paired comparisons below test them (paired t over tasks: new tasks)."
        )
    cal = doc.calibration
    if not cal:
        return "No recommendation: no calibration was computed for this run."
    if cal.status == "recommended":
        return f"Recommendation: {cal.summary}. What it generalises to: {_GENERALISES}."
    return f"No recommendation: {'; '.join(cal.reasons or ['the data cannot carry the rule'])}."


def host_agent(agent_sandbox: str | None) -> str:
    """What kept a host-side (external) agent in, as a clause of the isolation line ("" without one)."""
    if agent_sandbox is None:
        return ""
    if agent_sandbox.startswith("none"):
        return "; host agent NOT sandboxed (declared trusted: it could read the tests, the store and the host)"
    return f"; host agent in its own sandbox ({agent_sandbox})"


def isolation(doc: ReportDocument) -> str:
    """Isolation and enforcement in one line."""
    run = doc.run
    iso = run.isolation
    warn = {
        "none": " (NOT sandboxed)",
        "unrecorded": " (not recorded: treat as not sandboxed)",
        "unknown (imported)": " (headroom did not run these trials)",
    }.get(iso, "")
    storage = {True: "enforced", False: "NOT enforced", None: "unrecorded"}[run.storage_limit]
    line = (
        f"Isolation {iso}{warn}{host_agent(run.agent_sandbox)}; enforcement {run.enforcement} on backend "
        f"{run.backend}; storage limit {storage}."
    )
    if run.run_on_host:
        names = ", ".join(run.run_on_host[:5]) + (
            f" and {len(run.run_on_host) - 5} more" if len(run.run_on_host) > 5 else ""
        )
        line += (
            f" Run on the host by choice (run_on_host): {len(run.run_on_host)} task(s) without the container image "
            f"they name ({names})."
        )
    return line


def lines(doc: ReportDocument) -> list[str]:
    """The summary's text lines after the table: the moves (an import), the interval basis, the
    recommendation, isolation."""
    basis = basis_line(doc)
    not_started = checks.agent_not_found_line(doc.checks.agent_not_found) if doc.checks else None
    oracle = [f"Oracle check: {line}." for line in doc.run.oracle_check]  # kept apart: a run of its own
    return (
        moves_lines(doc)
        + ([basis] if basis else [])
        + [recommendation(doc), isolation(doc)]
        + oracle
        + ([not_started] if not_started else [])
    )
