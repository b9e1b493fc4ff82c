"""A run's trials and one trial's tries on a terminal (``headroom runs show``): what the viewer's pages show.

Everything printed here is the agent's or the store's text: outcome reasons, task ids, labels, log lines,
model errors. Each goes through :mod:`orchestrator.report.safe` (controls spelled out, rich markup escaped),
and log lines are printed as plain :class:`~rich.text.Text`, never parsed as markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator.report.safe import terminal_text as esc
from orchestrator.report.safe import visible_controls
from orchestrator.report.text import mib

#: Log lines shown per stream by default (the viewer shows the whole stored tail).
TAIL_LINES = 20
#: A model call's error is cut here, as on the viewer's trial page.
ERROR_CHARS = 200


def _num(value: float | int | None, fmt: str = "{:g}") -> str:
    return "—" if value is None else fmt.format(value)


def _outcome(t: dict[str, Any]) -> str:
    outcome = t.get("outcome") or t.get("status") or "—"
    reason = t.get("reason")
    return f"{outcome}({reason})" if reason else str(outcome)


def print_trials(run: Any, rows: list[dict[str, Any]], console: Console) -> None:
    """One line per trial: task, configuration, attempt, final outcome and reason, tries."""
    console.print(
        f"[bold]run {esc(run.run_id)}[/] ({esc(run.name)}, {esc(run.status)}): {len(rows)} trials; "
        f"`headroom runs show {esc(run.run_id)} TRIAL` shows one"
    )
    t = Table(box=None, pad_edge=False)
    for col in ("trial", "task", "config", "attempt", "outcome (reason)", "tries", "duration"):
        t.add_column(col, justify="right" if col in ("attempt", "tries", "duration") else "left", overflow="fold")
    for r in rows:
        t.add_row(
            esc(r["trial_id"]),
            esc(r["task_id"]),
            esc(r["config_label"]),
            str(r["attempt"]),
            esc(_outcome(r)) if r.get("outcome") or r.get("status") else "not run",
            str(r["tries"]),
            _num(r.get("duration_s"), "{:.2f} s"),
        )
    console.print(t)


def _log(console: Console, title: str, text: str, lines: int) -> None:
    kept = text.splitlines()
    cut = len(kept) - lines
    console.print(f"  [dim]{esc(title)}[/]" + (f" [dim](last {lines} of {len(kept)} lines)[/]" if cut > 0 else ""))
    for line in kept[-lines:]:
        # The agent's own bytes: controls spelled out, and a Text so "[bold]" stays text.
        console.print(Text("    " + visible_controls(line.expandtabs(4))), soft_wrap=True)


def _steps(console: Console, steps: list[dict[str, Any]], lines: int) -> None:
    t = Table(title="steps", title_justify="left", box=None, pad_edge=False)
    for col in ("step", "duration", "exit code", "signal", "timed out", "OOM kills", "OOM evidence", "termination"):
        t.add_column(col, overflow="fold")
    for s in steps:
        skipped = f" (skipped: {s['skipped']})" if s.get("skipped") else ""
        t.add_row(
            esc(f"{s.get('name')}{skipped}"),
            _num(s.get("duration_s"), "{:.2f} s"),
            _num(s.get("exit_code"), "{}"),
            esc(str(s["signal"])) if s.get("signal") is not None else "—",
            "yes" if s.get("timed_out") else "no",
            _num(s.get("oom_kills"), "{}"),
            esc(str(s.get("oom_evidence") or "—")),
            esc(str(s.get("termination_reason") or s.get("spawn_error") or "—")),
        )
    console.print(t)
    for s in steps:
        for stream in ("stdout_tail", "stderr_tail"):
            if s.get(stream):
                _log(console, f"{s.get('name')} {stream.split('_')[0]} (tail)", str(s[stream]), lines)


def _calls(console: Console, calls: list[dict[str, Any]]) -> None:
    t = Table(title="model calls (through the gateway)", title_justify="left", box=None, pad_edge=False)
    for col in ("#", "api", "model", "status", "latency", "tokens in", "tokens out", "cost", "error"):
        t.add_column(col, overflow="fold", justify="right" if col in ("#", "status", "latency") else "left")
    for c in calls:
        t.add_row(
            str(c["seq"]),
            esc(str(c["api"])),
            esc(str(c.get("model") or "—")),
            str(c["status"]),
            _num(c.get("latency_s"), "{:.3f} s"),
            _num(c.get("tokens_in"), "{:.0f}"),
            _num(c.get("tokens_out"), "{:.0f}"),
            _num(c.get("cost_usd"), "${:.6f}"),
            esc(str(c.get("error") or "")[:ERROR_CHARS]),
        )
    console.print(t)
    failed = [c for c in calls if c.get("error") or int(c["status"]) >= 400]
    if failed:
        console.print(f"  {len(failed)} of {len(calls)} calls failed")


def print_trial(
    run_id: str,
    detail: dict[str, Any],
    calls: dict[int, list[dict[str, Any]]],
    console: Console,
    *,
    lines: int = TAIL_LINES,
) -> None:
    """Every try of one trial: outcome and reason, steps with exit codes, signals and OOM evidence, the last
    lines of the agent's and the verifier's output, and the model calls with their errors."""
    p = detail["plan"]
    limit = "none" if p["limit_multiplier"] is None else f"{p['limit_multiplier']:g}x"
    console.print(
        f"[bold]trial {esc(p['trial_id'])}[/] of run {esc(run_id)}: task {esc(p['task_id'])}, configuration "
        f"{esc(p['config_label'])} (request {p['request_multiplier']:g}x, limit {limit}), attempt {p['attempt']}, "
        f"seed {p['seed']}; {len(detail['tries'])} tries"
    )
    if not detail["tries"]:
        console.print("no try has started yet")
    for t in detail["tries"]:
        mark = " [green](final result)[/]" if t.get("final") else (" (retried)" if t["status"] == "finished" else "")
        console.print()
        console.print(f"[bold]try {t['try']}[/]: {esc(_outcome(t))}{mark}")
        peak, lim = t.get("peak_memory_bytes"), t.get("limit_memory_bytes")
        share = f" ({100 * peak / lim:.0f}% of the limit)" if peak and lim else ""
        console.print(
            f"  status {esc(str(t['status']))}; reward {_num(t.get('reward'))}; "
            f"duration {_num(t.get('duration_s'), '{:.2f} s')}; "
            f"peak memory {mib(peak)} / {mib(lim) if lim else 'no limit'}{share}; "
            f"enforcement {esc(str(t.get('enforcement') or '—'))}"
        )
        if t.get("tokens_in") is not None or t.get("cost_usd") is not None:
            console.print(
                f"  tokens {_num(t.get('tokens_in'), '{:.0f}')} in, {_num(t.get('tokens_out'), '{:.0f}')} out; "
                f"cost {_num(t.get('cost_usd'), '${:.6f}')} ({esc(str(t.get('usage_source') or 'source unrecorded'))})"
            )
        if t["steps"]:
            _steps(console, t["steps"], lines)
        elif t.get("evidence") is None:
            console.print(f"  no evidence recorded for this try ({esc(str(t['status']))})")
        if calls.get(t["try"]):
            _calls(console, calls[t["try"]])
