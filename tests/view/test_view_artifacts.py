"""The viewer shows what a try left: its artifacts, a trajectory view, the exec log, model calls, raw downloads."""

from __future__ import annotations

import hashlib
import html
import json
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from orchestrator.artifacts import execlog, names
from orchestrator.artifacts.sink import StoreSink, TryKey
from orchestrator.store.sqlite import Store
from orchestrator.view.app import create_app

FIXTURES = Path(__file__).parent.parent / "fixtures" / "trajectories"
BINARY = bytes(range(256)) * 4


@pytest.fixture(scope="module")
def with_artifacts(view_store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TryKey]:
    """A copy of the real sweeps' store, with artifacts added to one of its tries as a backend would add them."""
    path = tmp_path_factory.mktemp("view-artifacts") / "h.db"
    shutil.copy(view_store, path)
    Store(path).close()  # as the sweep that wrote them would have it: schema current
    store = Store.open_existing(path)
    run_id = store.runs()[0].run_id
    trial_id, try_index = store.db.execute(
        "SELECT trial_id, try FROM executions WHERE run_id=? AND final=1 LIMIT 1", (run_id,)
    ).fetchone()
    store.close()
    key = TryKey(run_id, trial_id, try_index)
    sink = StoreSink(path)
    logs = tmp_path_factory.mktemp("logs")
    shutil.copy(FIXTURES / "atif-trajectory.json", logs / "trajectory.json")
    shutil.copy(FIXTURES / "chat-messages.traj.json", logs / "chat.traj.json")
    (logs / "blob.bin").write_bytes(BINARY)
    (logs / "<img src=x onerror=alert(1)>.txt").write_text("<script>alert('x')</script> plain text")
    sink.add_tree(key, names.LOGS_PREFIX, logs)
    # 1.5 MB: shown cut, downloadable whole (not agent/stdout: the sweep's backend kept the real one)
    sink.add_bytes(key, "logs/output.log", b"line\n" * 300_000)
    sink.add_bytes(
        key,
        names.EXEC_LOG,
        b"".join(
            execlog.dumps(r)
            for r in (
                execlog.ExecRecord(
                    command=["ls", "-la", "/app"],
                    cwd="/app",
                    exit_code=0,
                    duration_s=0.021,
                    stdout_bytes=120,
                    stderr_bytes=0,
                ),
                execlog.ExecRecord(
                    command="make test", exit_code=2, duration_s=3.5, stdout_bytes=4096, stderr_bytes=77
                ),
                execlog.ExecRecord(command=["sleep", "99"], timed_out=True, signal=9, duration_s=10.0),
            )
        )
        + b"not json\n",
    )
    sink.add_bytes(
        key,
        names.MODEL_CALLS,
        json.dumps(
            {
                "api": "openai-chat",
                "model": "fake-model-1",
                "status": 200,
                "latency_s": 0.12,
                "streamed": False,
                "tokens_in": 90,
                "tokens_out": 12,
                "request": {"messages": [{"role": "user", "content": "hi"}]},
                "response": {"choices": [{"message": {"content": "hello there"}}]},
            }
        ).encode()
        + b"\n",
    )
    sink.close()
    db = Store(path).db
    db.execute(
        "INSERT INTO model_calls VALUES (?,?,?,1,'2026-01-05T10:00:00Z','openai-chat','fake-model-1',200,0.12,"
        "0,90,12,0,0.00042,NULL)",
        (run_id, trial_id, try_index),
    )
    db.close()
    return path, key


@pytest.fixture(scope="module")
def client(with_artifacts: tuple[Path, TryKey]) -> TestClient:
    return TestClient(create_app(with_artifacts[0]), base_url="http://127.0.0.1")


def _page(client: TestClient, key: TryKey, name: str) -> str:
    res = client.get(f"/runs/{key.run_id}/artifact?trial={quote(key.trial_id)}&try={key.try_index}&name={quote(name)}")
    assert res.status_code == 200, res.text
    return html.unescape(res.text)


def test_the_trial_page_lists_each_tries_artifacts_and_model_calls(
    client: TestClient, with_artifacts: tuple[Path, TryKey]
) -> None:
    _, key = with_artifacts
    text = client.get(f"/runs/{key.run_id}/trial?id={quote(key.trial_id)}").text
    for name in ("logs/trajectory.json", "logs/blob.bin", names.AGENT_STDOUT, names.EXEC_LOG, names.MODEL_CALLS):
        assert f"name={quote(name)}" in text, name
    assert "Model calls (through the gateway)" in text and "$0.000420" in text
    assert "<img src=x onerror" not in text  # an agent's file name is text, never markup


def test_an_atif_trajectory_reads_as_messages_tool_calls_and_outputs(
    client: TestClient, with_artifacts: tuple[Path, TryKey]
) -> None:
    page = _page(client, with_artifacts[1], "logs/trajectory.json")
    assert "ATIF-v1.4" in page and "fixture-agent" in page
    order = [
        page.index(s)
        for s in (
            "You operate a Linux shell.",
            "Write the answer to /app/answer.txt",
            "I will look at the directory first.",
            "Writing the answer now.",
            "holds 42",
        )
    ]
    assert order == sorted(order)
    assert '"command": "ls -la /app"' in page and "README.md" in page and "of call_ls_1" in page
    assert "prompt_tokens=412" in page and "cached_tokens=128" in page and "prompt tokens: <b>1402" in page
    assert "The task names a file" in page  # reasoning


def test_chat_messages_with_anthropic_and_openai_tool_calls(
    client: TestClient, with_artifacts: tuple[Path, TryKey]
) -> None:
    page = _page(client, with_artifacts[1], "logs/chat.traj.json")
    assert "chat-messages" in page and "Fix the failing test." in page
    assert '"cmd": "pytest -q"' in page and "1 failed, 3 passed" in page and "of toolu_01" in page
    assert '"ok": true' in page and "submitted" in page and "input_tokens=220" in page


def test_the_exec_log_shows_command_exit_code_duration_and_output_sizes(
    client: TestClient, with_artifacts: tuple[Path, TryKey]
) -> None:
    page = _page(client, with_artifacts[1], names.EXEC_LOG)
    assert "ls -la /app" in page and "make test" in page and "3.500 s" in page and "4.0 KiB" in page
    assert "timed out" in page and "signal 9" in page and "not json" in page


def test_text_is_shown_cut_and_binary_only_as_a_download(
    client: TestClient, with_artifacts: tuple[Path, TryKey]
) -> None:
    _, key = with_artifacts
    assert "Showing the first 1.0 MiB" in _page(client, key, "logs/output.log")
    assert "Not text" in _page(client, key, "logs/blob.bin")
    page = _page(client, key, "logs/<img src=x onerror=alert(1)>.txt")
    res = client.get(
        f"/runs/{key.run_id}/artifact?trial={quote(key.trial_id)}&try={key.try_index}"
        f"&name={quote('logs/<img src=x onerror=alert(1)>.txt')}"
    )
    assert "<script>alert('x')</script>" in page and "<script>alert(" not in res.text
    raw = client.get(
        f"/runs/{key.run_id}/artifact/raw?trial={quote(key.trial_id)}&try={key.try_index}&name=logs/blob.bin"
    )
    assert raw.status_code == 200 and raw.content == BINARY
    assert raw.headers["content-type"] == "application/octet-stream"
    assert (
        raw.headers["content-disposition"].startswith("attachment")
        and raw.headers["x-content-type-options"] == "nosniff"
    )
    whole = client.get(
        f"/runs/{key.run_id}/artifact/raw?trial={quote(key.trial_id)}&try={key.try_index}"
        f"&name={quote('logs/output.log')}"
    )
    assert whole.content == b"line\n" * 300_000


def test_the_gateway_transcript_shows_each_call(client: TestClient, with_artifacts: tuple[Path, TryKey]) -> None:
    page = _page(client, with_artifacts[1], names.MODEL_CALLS)
    assert "openai-chat · fake-model-1 · status 200" in page and "hello there" in page


def test_unknown_artifacts_are_404_and_the_store_is_untouched(
    client: TestClient, with_artifacts: tuple[Path, TryKey]
) -> None:
    path, key = with_artifacts
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in path.parent.iterdir()}
    base = f"/runs/{key.run_id}/artifact"
    assert client.get(f"{base}?trial={quote(key.trial_id)}&try={key.try_index}&name=nope").status_code == 404
    assert client.get(f"{base}/raw?trial={quote(key.trial_id)}&try={key.try_index}&name=nope").status_code == 404
    assert client.get(f"{base}?trial=x&try=notanumber&name=y").status_code == 400
    _page(client, key, "logs/trajectory.json")
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in path.parent.iterdir()} == before
