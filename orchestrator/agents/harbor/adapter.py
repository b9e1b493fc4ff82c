"""Runs one Harbor agent, unchanged, against a headroom trial: the program of a ``kind: harbor`` external agent.

Run by Harbor's own interpreter (Python >= 3.12 with ``harbor`` installed), never by headroom's: it imports the
standard library and Harbor only, and reaches the trial through headroom's exec channel (the
``headroom_exec`` client headroom puts on the sandbox's ``PYTHONPATH``; failing that, the client file beside
this one). ``python adapter.py SPEC_JSON`` where SPEC_JSON is ``{"name" | "import_path", "model", "kwargs",
"path"}`` (orchestrator/agents/harbor/__init__.py writes it).

What it does, as Harbor's trial would:

1. builds the agent with Harbor's own factory (``AgentFactory.create_agent_from_config``);
2. gives it :class:`HeadroomEnvironment`, a Harbor ``BaseEnvironment`` whose every operation is an exec on
   the channel (uploads and downloads are base64 streams of files and tar archives through it);
3. runs the agent's ``setup`` (an installed agent's install step) and then ``run`` with the instruction from
   ``$HEADROOM_INSTRUCTION_FILE``, each timed in ``$HEADROOM_LOGS_DIR/harbor.json`` with the agent's own
   context (tokens and cost as Harbor's agent counted them; headroom's gateway stays the record).

An installed agent (a ``BaseInstalledAgent``: its ``setup`` runs an install script in the environment) is run in
two processes, each in the host sandbox: ``"phase": "setup"`` is headroom's ``agent_setup`` phase (its own timeout,
its time recorded apart, its failure ``infra_error(agent_setup_failed)``), ``"phase": "run"`` the agent step. What
``run`` needs of ``setup`` (the moved paths, the version it found) is handed over in ``harbor-setup.json`` in the
logs dir. Any other agent's ``setup`` holds state of its own process (terminus-2's tmux session), so it runs in the
agent step as before. ``adapter.py --describe SPEC_JSON`` prints what headroom plans by (is the name in Harbor's
registry, is the agent installed, its setup timeout) without running anything of the agent's.

Harbor's fixed environment paths (``/solution`` and the like) are created in the environment where it can; where
its root is read-only (the local backend), each is moved under the environment's temporary dir, and the paths
Harbor's agent names in its commands are rewritten to match.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import importlib.util
import io
import json
import logging
import os
import re
import shlex
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

#: litellm fetches its price map from the internet when imported unless told not to: the sandbox may have none.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harbor.agents.base import BaseAgent  # noqa: E402
from harbor.agents.factory import AgentFactory  # noqa: E402
from harbor.agents.installed.base import BaseInstalledAgent  # noqa: E402
from harbor.environments.base import BaseEnvironment, ExecResult, transfer_tar_filter  # noqa: E402
from harbor.environments.capabilities import EnvironmentCapabilities  # noqa: E402
from harbor.models.agent.context import AgentContext  # noqa: E402
from harbor.models.agent.name import AgentName  # noqa: E402
from harbor.models.task.config import EnvironmentConfig  # noqa: E402
from harbor.models.trial.config import AgentConfig  # noqa: E402
from harbor.models.trial.paths import EnvironmentPaths, TrialPaths  # noqa: E402

#: How much one download asks for per exec: its base64 stays below the channel's cap on a command's stdout (16 MiB).
#: Every transfer is base64 text: a Pod's exec stream carries text, and raw bytes would not survive it.
CHUNK = 8 * 1024 * 1024
#: Harbor's fixed paths in the environment an agent may write to besides its logs dir (``/installed-agent``: where
#: every installed agent's ``setup`` puts its files).
HARBOR_PATHS = (str(EnvironmentPaths.solution_dir), "/installed-agent")
#: Exit status when Harbor's agent raised: the agent failed (headroom's verifier still decides the trial).
AGENT_RAISED = 1
#: What the setup process hands the run process, in the logs dir.
SETUP_STATE = "harbor-setup.json"


def _exec_client() -> ModuleType:
    try:
        return importlib.import_module("headroom_exec")  # the copy headroom puts on the sandbox's PYTHONPATH
    except ImportError:
        path = Path(__file__).resolve().parent.parent / "exec" / "__init__.py"
        spec = importlib.util.spec_from_file_location("headroom_exec", path)
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules["headroom_exec"] = module  # its dataclasses look their module up while it loads
        spec.loader.exec_module(module)
        return module


hx = _exec_client()


class HeadroomEnvironment(BaseEnvironment):
    """Harbor's environment interface on headroom's exec channel: one trial's environment, already started by
    headroom and ended by it (``start`` and ``stop`` do nothing)."""

    def __init__(self, trial_dir: Path, task_name: str, default_user: str | None = None) -> None:
        env_dir = trial_dir / "environment"
        env_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(
            environment_dir=env_dir,
            environment_name=task_name,
            session_id=f"{task_name}__headroom__env",
            trial_paths=TrialPaths(trial_dir),
            task_env_config=EnvironmentConfig(),
        )
        self.default_user = default_user
        # Every exec already carries the trial contract's variables ($HEADROOM_WORKDIR and the like, which the
        # task's solution and Harbor's commands may name): the exec channel gives them on every backend.
        #: Harbor path -> where it lives in this environment (only those moved)
        self.moved: dict[str, str] = {}
        #: whether the environment's logs dir is this process's logs dir (the same files, not a copy)
        self.logs_shared = False
        #: whether the channel takes Harbor's ``user`` (Pods refuse any: each exec runs as the container's user)
        self.users = True
        self.users_refused: str | None = None

    @staticmethod
    def type() -> str:
        return "headroom"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # headroom enforces the network itself (the task's and agent.network); Harbor is not asked to.
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        pass  # headroom built and checked the environment

    async def start(self, force_build: bool) -> None:
        pass

    async def stop(self, delete: bool) -> None:
        pass

    # -- Harbor's fixed paths -------------------------------------------------------------
    async def place_fixed_paths(self) -> None:
        """Make Harbor's fixed paths where the environment lets us, else move them under its temporary dir."""
        for path in HARBOR_PATHS:
            probe = await self._run(f"mkdir -p {shlex.quote(path)} && test -w {shlex.quote(path)}", None, None, 30)
            if probe.returncode == 0:
                continue
            tmp = await self._run('d="$(mktemp -d)" && printf %s "$d"', None, None, 30)
            base = tmp.stdout.decode().strip()
            if tmp.returncode != 0 or not base.startswith("/"):
                raise RuntimeError(f"cannot place Harbor's {path} in the environment: {tmp.stderr.decode()[-200:]}")
            self.moved[path] = f"{base}/{PurePosixPath(path).name}"
            await self._run(f"mkdir -p {shlex.quote(self.moved[path])}", None, None, 30)

    async def check_logs_shared(self, logs: Path) -> None:
        """Whether the environment's /logs/agent is the host logs dir itself: then Harbor must not download a file
        onto itself (opening the target for writing would empty the source)."""
        marker = logs / f".harbor-shared-{os.getpid()}"
        token = os.urandom(8).hex()
        marker.write_text(token)
        try:
            r = await self._run(f"cat {shlex.quote(str(EnvironmentPaths.agent_dir / marker.name))}", None, None, 30)
            self.logs_shared = r.returncode == 0 and r.stdout.decode().strip() == token
        finally:
            marker.unlink(missing_ok=True)

    def is_path_mounted(self, environment_path: Any, host_path: Path) -> bool:
        agent_dir = EnvironmentPaths.agent_dir
        path = PurePosixPath(environment_path)
        if not (self.logs_shared and path.is_relative_to(agent_dir)):
            return False
        host_logs = (self.trial_paths.agent_dir).resolve()
        return host_path.resolve() == host_logs.joinpath(*path.relative_to(agent_dir).parts)

    def where(self, path: str) -> str:
        for harbor_path, here in self.moved.items():
            if path == harbor_path or path.startswith(harbor_path + "/"):
                return here + path[len(harbor_path) :]
        return path

    def rewrite(self, command: str) -> str:
        """A command with Harbor's moved paths replaced where they appear as paths (not inside other words)."""
        for harbor_path, here in self.moved.items():
            command = re.sub(rf"(?<![\w./-]){re.escape(harbor_path)}(?=$|[/\s'\";&|)<>])", here, command)
        return command

    # -- the channel ----------------------------------------------------------------------
    async def _run(
        self,
        command: str,
        cwd: str | None,
        env: dict[str, str] | None,
        timeout_sec: float | None,
        user: str | int | None = None,
        stdin: bytes | None = None,
    ) -> Any:
        if user is not None and self.users:
            try:
                return await asyncio.to_thread(
                    hx.run, command, cwd=cwd, env=env, stdin=stdin, timeout=timeout_sec, user=str(user)
                )
            except hx.ExecChannelError as exc:
                # Pods run every exec as the container's own user and refuse another: so does Harbor's agent then
                self.users = False
                self.users_refused = str(exc)
        return await asyncio.to_thread(hx.run, command, cwd=cwd, env=env, stdin=stdin, timeout=timeout_sec)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        r = await self._run(
            self.rewrite(command),
            self.where(cwd) if cwd else None,
            self._merge_env(env),
            timeout_sec,
            user if user is not None else self.default_user,
        )
        return ExecResult(
            stdout=r.stdout.decode("utf-8", "replace"),
            stderr=r.stderr.decode("utf-8", "replace"),
            return_code=r.returncode,
        )

    async def _checked(self, command: str, stdin: bytes | None = None) -> bytes:
        r = await self._run(command, None, None, None, stdin=stdin)
        if r.returncode != 0:
            raise RuntimeError(f"{command!r} failed in the environment ({r.returncode}): {r.stderr.decode()[-300:]}")
        if r.stdout_bytes > len(r.stdout):
            raise RuntimeError(f"{command!r}: the channel cut its output at {len(r.stdout)} bytes")
        return bytes(r.stdout)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = shlex.quote(self.where(target_path))
        data = Path(source_path).read_bytes()
        await self._checked(f'mkdir -p "$(dirname {target})" && base64 -d > {target}', stdin=base64.b64encode(data))

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for child in sorted(Path(source_dir).iterdir()):
                tar.add(child, arcname=child.name)
        target = shlex.quote(self.where(target_dir))
        await self._checked(
            f"mkdir -p {target} && base64 -d | tar -xzf - --no-same-owner -C {target}",
            stdin=base64.b64encode(buf.getvalue()),
        )

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        source = shlex.quote(self.where(source_path))
        out = Path(target_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("wb") as f:
            offset = 0
            while True:
                piece = base64.b64decode(
                    await self._checked(f"tail -c +{offset + 1} {source} | head -c {CHUNK} | base64")
                )
                f.write(piece)
                offset += len(piece)
                if len(piece) < CHUNK:
                    return

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        source = shlex.quote(self.where(source_dir))
        made = (await self._checked('f="$(mktemp)" && printf %s "$f"')).decode().strip()
        try:
            await self._checked(f"tar -czf {shlex.quote(made)} -C {source} .")
            with tempfile.TemporaryDirectory() as tmp:
                archive = Path(tmp) / "dir.tar.gz"
                await self.download_file(made, archive)
                out = Path(target_dir)
                out.mkdir(parents=True, exist_ok=True)
                with tarfile.open(archive, "r:gz") as tar:
                    tar.extractall(out, filter=transfer_tar_filter)
        finally:
            await self._run(f"rm -f {shlex.quote(made)}", None, None, 30)


def _gateway_env() -> None:
    """Where the model is: headroom's gateway, with the try's own key (never the provider's). Harbor's agents
    call models through litellm, which reads the *_API_BASE names as well as the SDKs' *_BASE_URL."""
    for provider in ("OPENAI", "ANTHROPIC"):
        base = os.environ.get(f"{provider}_BASE_URL")
        if base:
            os.environ.setdefault(f"{provider}_API_BASE", base)


def _restore(environment: HeadroomEnvironment, agent: BaseAgent, state: dict[str, Any]) -> None:
    """The run process takes over what the setup process placed: the same moved paths, the version it found.
    The file is in the agent's own logs dir, so only what fits its shape is taken."""
    moved = state.get("moved")
    if isinstance(moved, dict):
        for path, here in moved.items():
            if path in HARBOR_PATHS and isinstance(here, str) and here.startswith("/") and "\n" not in here:
                environment.moved[path] = here
    version = state.get("version")
    if isinstance(version, str) and isinstance(agent, BaseInstalledAgent) and agent._version is None:
        agent._version = version


async def _main(spec: dict[str, Any]) -> int:
    logs = Path(os.environ["HEADROOM_LOGS_DIR"])
    instruction = Path(os.environ["HEADROOM_INSTRUCTION_FILE"]).read_text()
    task = os.environ.get("HEADROOM_TASK_ID", "task")
    phase = spec.get("phase") or "all"
    _gateway_env()
    logging.basicConfig(
        filename=str(logs / ("harbor-setup.log" if phase == "setup" else "harbor.log")),
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    record: dict[str, Any] = {"agent": spec.get("name") or spec.get("import_path"), "model": spec.get("model")}
    with tempfile.TemporaryDirectory(prefix="harbor-trial-") as tmp:
        trial_dir = Path(tmp)
        # The agent's host logs dir is headroom's logs dir: what Harbor's agent writes there is the try's logs/.
        (trial_dir / "agent").symlink_to(logs, target_is_directory=True)
        environment = HeadroomEnvironment(trial_dir, task)
        extra: dict[str, Any] = {}
        if spec.get("name") == "oracle":
            # Harbor's oracle reads the task's solution from a task dir: headroom put it in the environment.
            task_dir = trial_dir / "task"
            await environment.download_dir(os.environ["HEADROOM_TASK_DIR"], task_dir)
            # Harbor's task loader insists on a tests/test.sh; the verifier's tests stay out of the agent's reach,
            # so the oracle's copy holds a placeholder it never runs.
            (task_dir / "tests").mkdir(exist_ok=True)
            (task_dir / "tests" / "test.sh").write_text("#!/bin/bash\n# placeholder: headroom runs the verifier\n")
            timeout = os.environ.get("HEADROOM_AGENT_TIMEOUT_S")
            extra = {
                "task_dir": task_dir,
                "trial_paths": TrialPaths(trial_dir),
                "agent_timeout_sec": float(timeout) if timeout else None,
            }
        config = AgentConfig(
            name=spec.get("name"),
            import_path=spec.get("import_path"),
            model_name=spec.get("model"),
            kwargs=dict(spec.get("kwargs") or {}),
        )
        agent = AgentFactory.create_agent_from_config(config, logs_dir=trial_dir / "agent", **extra)
        installed = isinstance(agent, BaseInstalledAgent)
        state_file = logs / SETUP_STATE
        if phase == "setup":
            return await _setup_phase(agent, environment, logs, state_file, installed)
        phases: tuple[str, ...] = ("setup", "run")
        if phase == "run" and installed:
            # headroom's agent_setup phase ran setup() in a process of its own: only what it placed is taken over
            phases = ("run",)
            state = _read_state(state_file)
            _restore(environment, agent, state)
            record["setup_phase"] = "agent_setup"
            if isinstance(state.get("setup_s"), (int, float)):
                record["setup_s"] = state["setup_s"]
        else:
            await environment.place_fixed_paths()
        await environment.check_logs_shared(logs)
        context = AgentContext()
        code = 0
        for step in phases:
            started = time.monotonic()
            try:
                if step == "setup":
                    await agent.setup(environment=environment)
                else:
                    await agent.run(instruction, environment, context)
            except Exception as exc:  # Harbor's agent failed: say so in the logs, as Harbor's trial would
                record[f"{step}_error"] = f"{type(exc).__name__}: {exc}"
                (logs / "harbor-exception.txt").write_text(traceback.format_exc())
                code = AGENT_RAISED
                break
            finally:
                record[f"{step}_s"] = round(time.monotonic() - started, 3)
        try:
            if context.is_empty():
                agent.populate_context_post_run(context)
        except Exception as exc:  # the context is the agent's own count; headroom's gateway is the record
            record["context_error"] = f"{type(exc).__name__}: {exc}"
        record["context"] = context.model_dump(mode="json", exclude={"rollout_details"})
        record["moved_paths"] = environment.moved
        record["logs_shared"] = environment.logs_shared
        if environment.users_refused:
            record["user_ignored"] = environment.users_refused
        (logs / "harbor.json").write_text(json.dumps(record, indent=2, default=str))
    return code


def _read_state(state_file: Path) -> dict[str, Any]:
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


async def _setup_phase(
    agent: BaseAgent, environment: HeadroomEnvironment, logs: Path, state_file: Path, installed: bool
) -> int:
    """headroom's agent_setup phase: an installed agent's ``setup`` (its install script, run in the environment);
    for any other agent nothing (its ``setup`` runs in the agent step). Exit 0 when it is done, else non-zero."""
    state: dict[str, Any] = {"installed": installed}
    if not installed:
        state_file.write_text(json.dumps(state))
        return 0
    started = time.monotonic()
    code = 0
    try:
        await environment.place_fixed_paths()
        await environment.check_logs_shared(logs)
        await agent.setup(environment=environment)
        state["version"] = agent.version()
    except Exception as exc:  # an install that failed: headroom's agent_setup_failed, never the model's failure
        state["setup_error"] = f"{type(exc).__name__}: {exc}"
        (logs / "harbor-setup-exception.txt").write_text(traceback.format_exc())
        print(f"harbor agent setup failed: {state['setup_error']}"[-2000:], file=sys.stderr)
        code = AGENT_RAISED
    state["setup_s"] = round(time.monotonic() - started, 3)
    state["moved"] = environment.moved
    state_file.write_text(json.dumps(state, indent=2, default=str))
    return code


def describe(spec: dict[str, Any]) -> dict[str, Any]:
    """What headroom plans a Harbor agent by, from Harbor's own registry: whether the name is there, whether the
    agent is installed (its ``setup`` is an install: headroom's agent_setup phase), its setup timeout. A custom
    agent (``import_path``) is not imported here (its code runs only in the sandbox): ``installed`` is None."""
    name = spec.get("name")
    if not name:
        return {"known": True, "installed": None, "setup_timeout_s": BaseAgent.DEFAULT_SETUP_TIMEOUT_SEC}
    try:
        cls = AgentFactory.get_agent_class(AgentName(name))
    except ValueError:
        return {"known": False, "names": AgentFactory.registered_names()}
    return {
        "known": True,
        "installed": issubclass(cls, BaseInstalledAgent),
        "setup_timeout_s": float(cls.DEFAULT_SETUP_TIMEOUT_SEC),
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--describe"] and len(argv) == 2:
        print(json.dumps(describe(json.loads(argv[1]))))
        return 0
    if len(argv) != 1:
        print("usage: adapter.py SPEC_JSON | adapter.py --describe SPEC_JSON", file=sys.stderr)
        return 2
    spec = json.loads(argv[0])
    if spec.get("path"):
        sys.path.insert(0, spec["path"])  # a custom agent's module (import_path), from agent.path
    return asyncio.run(_main(spec))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
