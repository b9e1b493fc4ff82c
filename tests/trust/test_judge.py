"""Judge calibration against a small fake OpenAI-compatible endpoint that this test serves on loopback.

The fake stands in for a real LLM (none can run here); its behaviour is scripted so the
expected rates are known exactly: it picks position A for 'pos-' pairs, the longer response
for 'len-' pairs, and the response containing GOOD otherwise.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.trust.judge import Judge, calibrate, judge_pairs, load_pairs
from tests.cli_run import headroom as run_cli

SECRET = "sk-judge-canary-0123456789abcdef"
seen_auth: list[str | None] = []


class FakeJudge(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        seen_auth.append(self.headers.get("Authorization"))
        content = body["messages"][0]["content"]
        task = re.search(r"Task:\n(.*?)\n\nResponse A:\n", content, re.S).group(1)  # type: ignore[union-attr]
        a = re.search(r"Response A:\n(.*?)\n\nResponse B:\n", content, re.S).group(1)  # type: ignore[union-attr]
        b = re.search(r"Response B:\n(.*)\n$", content, re.S).group(1)  # type: ignore[union-attr]
        if task.startswith("pos-"):
            answer = "A"
        elif task.startswith("len-"):
            answer = "A" if len(a) > len(b) else "B"
        else:
            answer = "A" if "GOOD" in a else "B"
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": f"Verdict: {answer}"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeJudge)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _pairs(path: Path) -> Path:
    rows = []
    for i in range(10):  # position-biased: inconsistent, first position twice
        rows.append(
            {"id": f"p{i}", "prompt": f"pos-{i}", "response_a": "x", "response_b": "y", "human": "a" if i % 2 else "b"}
        )
    for i in range(10):  # length-biased but consistent
        rows.append(
            {
                "id": f"l{i}",
                "prompt": f"len-{i}",
                "response_a": "short",
                "response_b": "a much longer answer " * 3,
                "human": "a",
            }
        )
    for i in range(20):  # content-driven and consistent, agreeing with the humans
        good_a = i % 2 == 0
        rows.append(
            {
                "id": f"c{i}",
                "prompt": f"task-{i}",
                "response_a": "GOOD" if good_a else "poor",
                "response_b": "poor" if good_a else "GOOD",
                "human": "a" if good_a else "b",
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rates_match_the_scripted_judge(endpoint: str, tmp_path: Path) -> None:
    pairs = load_pairs(_pairs(tmp_path / "pairs.jsonl"))
    judge = Judge(endpoint, "fake-judge")
    report = calibrate(judge_pairs(judge, pairs))
    assert judge.calls == 80  # every pair in both orders
    assert report["order_consistency"]["k"] == 30 and report["order_consistency"]["n"] == 40
    assert report["position_bias"]["rate"] == 1.0 and report["position_bias"]["favoured"] == "first"
    # humans: 20 content pairs agree; 10 length pairs: judge says b (longer), humans said a
    h = report["human_agreement"]
    assert h["n"] == 30 and h["raw_agreement"] == pytest.approx(20 / 30)
    assert h["ci95"][0] < h["kappa"] < h["ci95"][1]
    lb = report["length_bias"]["judge_prefers_longer"]
    assert lb["k"] == 10 and lb["n"] == 10 and lb["p_value_vs_half"] < 0.01
    humans = report["length_bias"]["humans_prefer_longer"]
    assert (humans["k"], humans["n"]) == (0, 10)  # the humans preferred the short answer every time


def test_cli_sends_the_key_but_never_prints_it(endpoint: str, tmp_path: Path) -> None:
    seen_auth.clear()
    pairs = _pairs(tmp_path / "pairs.jsonl")
    out = tmp_path / "report.json"
    proc = run_cli(
        "tasks",
        "judge",
        "calibrate",
        str(pairs),
        "--endpoint",
        endpoint,
        "--model",
        "fake-judge",
        "--api-key-env",
        "JUDGE_KEY",
        "-o",
        str(out),
        env={"PATH": "/usr/bin:/bin", "JUDGE_KEY": SECRET},
        inherit=False,
        timeout=None,
    )
    assert proc.returncode == 0, proc.stderr
    assert seen_auth and all(a == f"Bearer {SECRET}" for a in seen_auth)
    assert SECRET not in proc.stdout + proc.stderr + out.read_text()
    assert json.loads(out.read_text())["pairs"] == 40
    assert proc.stdout == ""  # -o FILE: the report goes to the file instead of stdout


def test_bad_pairs_file_and_dead_endpoint_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "prompt": "p"}\n')
    proc = run_cli(
        "tasks", "judge", "calibrate", str(bad), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", timeout=None
    )
    assert proc.returncode == 2 and "line 1" in proc.stderr and "Traceback" not in proc.stderr
    good = _pairs(tmp_path / "p.jsonl")
    proc = run_cli(
        "tasks", "judge", "calibrate", str(good), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", timeout=None
    )
    assert proc.returncode == 2 and "judge endpoint failed" in proc.stderr and "Traceback" not in proc.stderr
