"""task.toml as every backend delivers it to the agent: without the grader's, verifier's and oracle's sections."""

from __future__ import annotations

import tomllib
from pathlib import Path

from orchestrator.backends.docker.backend import task_toml
from orchestrator.tasks.agent_view import agent_task_toml, delivered
from orchestrator.tasks.files import AGENT_TOML_KEY, bundle
from orchestrator.tasks.image import write_context
from orchestrator.tasks.loader import load_tasks
from tests.taskfactory import write_task

SECRETS = ("secret-grader", "secret-verifier", "secret-oracle")
TABLES = f'''
[verifier.env]
EXPECTED = "{SECRETS[1]}"

[solution.env]
KEY = "{SECRETS[2]}"

[grader]
exact = "{SECRETS[0]}"
'''


def _task(root: Path) -> Path:
    write_task(root, "t", solve="true\n")
    toml = root / "t" / "task.toml"
    toml.write_text("# kept: the maintainer's comment\n" + toml.read_text() + TABLES)
    return root / "t"


def test_both_toml_spellings_lose_the_secrets_and_keep_the_rest() -> None:
    dotted = (
        'version = "1.0"\nenvironment = {cpus = 1, memory_mb = 64}\nagent.timeout_sec = 10\n'
        f'verifier.timeout_sec = 10\nverifier.env.EXPECTED = "{SECRETS[1]}"\n'
        f'solution = {{env = {{KEY = "{SECRETS[2]}"}}}}\ngrader.exact = "{SECRETS[0]}"\n'
    )
    view = tomllib.loads(agent_task_toml(dotted))
    assert view == {
        "version": "1.0",
        "environment": {"cpus": 1, "memory_mb": 64},
        "agent": {"timeout_sec": 10},
        "verifier": {"timeout_sec": 10},
    }
    assert agent_task_toml("not [valid") == ""  # never passed through unread
    assert delivered("tests/task.toml", b"x = 1") == b"x = 1"  # only the task's own task.toml


def test_every_delivery_path_carries_the_view(tmp_path: Path) -> None:
    task_dir = _task(tmp_path / "tasks")
    (task,) = load_tasks(tmp_path / "tasks")
    assert task.spec.grader is not None and task.spec.verifier.env["EXPECTED"] == SECRETS[1]  # headroom reads all

    def clean(text: str) -> None:
        assert not any(s in text for s in SECRETS), text
        assert "# kept: the maintainer's comment" in text and tomllib.loads(text)["environment"]

    # docker: the tar entry for the task dir
    ((path, data, _),) = task_toml(task_dir, "/headroom/task")
    assert path == "/headroom/task/task.toml"
    clean(data.decode())
    # kubernetes, ConfigMap bundle: the pod mounts the view's key at task.toml; the set's files stay whole
    b = bundle(task.id, task.path, task.digest)
    (item,) = [i for i in b.items("") if i["path"] == "task.toml"]
    assert item["key"] == AGENT_TOML_KEY
    cm = b.configmap({})
    clean(cm["data"][AGENT_TOML_KEY])
    own = next(f for f in b.files if f.path == "task.toml")
    assert SECRETS[0] in cm["data"][own.key]  # what the controller loads a pushed set from
    # kubernetes, task-set image: trial pods copy the folder; the catalog keeps the original for the controller
    cat = write_context(tmp_path / "tasks", tmp_path / "ctx", "base")
    clean((tmp_path / "ctx" / "headroom-tasks" / "t" / "task.toml").read_text())
    assert SECRETS[0] in cat["tasks"]["t"]["task_toml"]
