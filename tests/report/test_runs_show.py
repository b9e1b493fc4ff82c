"""`headroom runs show RUN [TRIAL]`, `headroom runs` and the end of a sweep, on a real sweep through the gateway.

The agent calls a scripted model (tests/agents/fake_model.py, standing in for a model provider, which cannot run
here) through headroom's real gateway: its first call gets a 429, its second an answer. Then it prints 30 lines,
writes to stderr and exits 7; on the task "hog" it first allocates far past its 64 MiB limit (a real OOM kill
where cgroups are writable). `runs show` must tell, on a terminal, what the viewer's trial page tells.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.agents.fake_model import FakeModel, Reply
from tests.cli_run import headroom as run_cli
from tests.taskfactory import CGROUPS, write_task

pytestmark = pytest.mark.slow

UPSTREAM_KEY = "sk-upstream-show-0123456789abcdefghij"
AGENT = r"""python3 - <<'PY'
import json, os, sys, urllib.error, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
messages = [{"role": "user", "content": os.environ["HEADROOM_INSTRUCTION"]}]
for _ in range(2):
    body = json.dumps({"model": "fake-model-1", "messages": messages}).encode()
    req = urllib.request.Request(base + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req).read()
        print("model answered")
    except urllib.error.HTTPError as e:
        print("model error", e.code)
    messages.append({"role": "assistant", "content": "again"})
for i in range(30):
    print(f"line {i:02d}")
print("boom [bold]not markup[/bold] \x1b[31mred", file=sys.stderr, flush=True)
sys.stdout.flush()
if "hog" in os.environ["HEADROOM_INSTRUCTION"]:
    hog = b"x" * (400 * 1024 * 1024)
sys.exit(7)
PY
"""


def headroom(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"COLUMNS": "200", **(env or {})}, check=True)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("runs-show")
    root = tmp / "tasks"
    for name in ("plain", "hog"):
        task = write_task(root, name, solve="true\n", memory_mb=64)
        toml = task / "task.toml"
        toml.write_text(toml.read_text().replace("[environment]\n", "[environment]\nallow_internet = true\n", 1))
    store = tmp / "h.db"
    with FakeModel([Reply(error=429), Reply("done")], openai_key=UPSTREAM_KEY) as fake:
        experiment = {
            "tasks_dir": str(root),
            "configurations": ["1", "2"],
            "attempts": 1,
            "concurrency": 1,
            "allow_internet": True,
            "agent": {"command": AGENT},
            "gateway": {"openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP_OPENAI"}},
        }
        spec = tmp / "exp.yaml"
        spec.write_text(yaml.safe_dump(experiment))
        res = headroom(
            "sweep", "--experiment", str(spec), "--store", str(store), "--no-canary", env={"UP_OPENAI": UPSTREAM_KEY}
        )
    run_id = json.loads(headroom("runs", "--store", str(store), "--json").stdout)["runs"][0]["run_id"]
    return store, run_id, res


def test_the_sweep_ends_with_the_summary_and_says_where_the_rest_is(swept) -> None:
    store, run_id, res = swept
    out = res.stdout
    assert "Summary (95% intervals)" in out and "1x-strict" in out and "1x/2x" in out
    assert "No recommendation" in out and "Isolation" in out  # the recommendation and isolation lines
    # the rest is one command away, not printed: no outcome, cost or comparison tables
    assert (
        "Outcomes by configuration" not in out and "Latency and cost" not in out and "Against the reference" not in out
    )
    assert f"headroom report {store}:{run_id}" in " ".join(out.split())
    # a run of two tasks has no new-tasks interval, and says why
    assert "No new-tasks interval for any configuration: 2 tasks, fewer than the 10" in " ".join(out.split())
    assert "[100.0, 100.0]" not in out and "[0.0, 0.0]" not in out
    full = headroom("report", f"{store}:{run_id}").stdout
    assert "Outcomes by configuration" in full and "Latency and cost" in full


def test_runs_lists_the_headline_of_each_configuration_labelled(swept) -> None:
    store, run_id, _ = swept
    listing = json.loads(headroom("runs", "--store", str(store), "--json").stdout)["runs"][0]
    configs = {c["label"]: c for c in listing["configurations"]}
    assert list(configs) == ["1x-strict", "1x/2x"]  # plan order
    for c in configs.values():
        assert (c["trials_finished"], c["passed"]) == (2, 0)
        assert c["score"] == 0.0 and c["score_low"] == 0.0 and 0 < c["score_high"] < 1  # Wilson over 2 trials
    table = " ".join(headroom("runs", "--store", str(store)).stdout.split())
    assert "headline per configuration" in table
    for label, c in configs.items():
        assert f"{label}: 0.0% [0.0, {100 * c['score_high']:.1f}], infra" in table  # a narrow table folds the rest
    rates = {f"{100 * c['infra_error_rate']:.1f}%" for c in configs.values()}
    assert all(r in table for r in rates)
    assert "score with infra errors counted as failures [Wilson 95%, these tasks]" in table  # what each line is


def test_runs_show_lists_the_trials_with_their_outcome_and_reason(swept) -> None:
    store, run_id, _ = swept
    trials = json.loads(headroom("runs", "show", f"{store}:{run_id}", "--json").stdout)["trials"]
    assert sorted((t["task_id"], t["config_label"]) for t in trials) == sorted(
        (task, label) for task in ("plain", "hog") for label in ("1x-strict", "1x/2x")
    )
    listing = headroom("runs", "show", f"{store}:{run_id}").stdout
    for t in trials:
        assert t["trial_id"] in listing
        shown = t["outcome"] + (f"({t['reason']})" if t["reason"] else "")
        assert shown in listing


def test_runs_show_a_trial_prints_what_the_viewer_s_trial_page_shows(swept) -> None:
    store, run_id, _ = swept
    db_trials = json.loads(headroom("runs", "show", f"{store}:{run_id}", "--json").stdout)["trials"]
    for t in db_trials:
        page = headroom("runs", "show", f"{store}:{run_id}", t["trial_id"], "--lines", "5").stdout
        detail = json.loads(headroom("runs", "show", f"{store}:{run_id}", t["trial_id"], "--json").stdout)
        (only,) = detail["tries"]
        flat = " ".join(page.split())
        # outcome and reason
        assert f"try 0: {only['outcome']}" + (f"({only['reason']})" if only["reason"] else "") in flat
        # steps, exit codes and signals, from the evidence the backend recorded
        agent = next(s for s in only["steps"] if s["name"] == "agent")
        row = next(line for line in page.splitlines() if line.startswith("agent "))
        cells = row.split()  # step, duration and its unit, exit code, signal, timed out, OOM kills, ...
        assert cells[3] == str(agent["exit_code"]) and (agent["signal"] is None) == (cells[4] == "—"), row
        assert cells[6] == str(agent["oom_kills"]), row
        # the last lines of the agent's output: the last 5 of its 30-odd, not the first
        assert "(last 5 of" in flat and "line 29" in flat and "line 20" not in flat
        assert "\x1b" not in page  # the agent's escape sequences are spelled out, never obeyed
        # the model calls, with their errors
        calls = detail["model_calls"]["0"]
        assert [c["status"] for c in calls] == [429, 200]
        assert "model calls (through the gateway)" in page and "1 of 2 calls failed" in page
        assert re.search(r"\b1\s+openai-chat\s+\S+\s+429\b", page), page
        if t["task_id"] == "hog" and CGROUPS:  # a real OOM kill: its evidence is on the page
            assert agent["oom_kills"] >= 1 and only["reason"] == "oom_killed"
            assert agent["oom_evidence"] and str(agent["oom_evidence"]) in row
        if t["task_id"] == "plain":
            assert only["outcome"] == "failed" and agent["exit_code"] == 7 and cells[3] == "7"
            assert "boom [bold]not markup[/bold] \\x1b[31mred" in page  # its stderr, as text


def test_runs_show_names_a_missing_trial_in_one_line(swept) -> None:
    store, run_id, _ = swept
    res = run_cli("runs", "show", f"{store}:{run_id}", "plain:1x-strict", timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert "has no trial 'plain:1x-strict'" in line and "did you mean plain:1x-strict:0" in line
