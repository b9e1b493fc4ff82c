"""What a task needs from the backend that runs it, read from its files (docs/import.md, "What a backend refuses").

A task made for Harbor or Terminal-Bench 2 often needs more than CPU and memory: its container image (the
``docker_image`` it names, or the image its ``environment/Dockerfile`` builds), GPUs, the network (its
verifier installs pytest from the internet), more containers beside it (``docker-compose.yaml`` with more than
one service), or a CPU architecture. A backend that cannot give one of these does not fail loudly: the task
runs anyway and its trials score as the model's failures. ``orchestrator/engine/faithful.py`` compares these
needs with what the backend declares and refuses the sweep before anything runs.

Each need carries the evidence it was read from, which the refusal quotes.
"""

from __future__ import annotations

import functools
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.spec.task import Task

IMAGE, GPUS, INTERNET, COMPOSE, ARCH, TPU, OS = "image", "gpus", "internet", "compose", "arch", "tpu", "os"
#: Where a network need applies: the trial's environment (the verifier, the exec channel) or the oracle agent.
ENVIRONMENT, ORACLE = "environment", "oracle"

COMPOSE_FILES = (
    "environment/docker-compose.yaml",
    "environment/docker-compose.yml",
    "docker-compose.yaml",
    "docker-compose.yml",
)
_ARCH = {
    "x86_64": "amd64",
    "x86-64": "amd64",
    "amd64": "amd64",
    "x64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "arm64/v8": "arm64",
    "armv7l": "arm",
    "arm/v7": "arm",
    "arm": "arm",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
    "i386": "386",
    "i686": "386",
    "386": "386",
}
_FROM_PLATFORM = re.compile(r"^\s*FROM\s+--platform=(\S+)", re.I | re.M)
#: Commands that reach outside the machine: package installers and downloads from a non-local host.
_NETWORK = re.compile(
    r"\b(?:curl|wget)\b[^\n]*\bhttps?://(?!(?:localhost|127\.|\[::1\]|0\.0\.0\.0))"
    r"|\bapt(?:-get)?\s+(?:-\S+\s+)*(?:install|update)\b"
    r"|\bapk\s+add\b"
    r"|\b(?:pip3?|python3?\s+-m\s+pip|uv\s+pip)\s+install\b"
    r"|\buvx\b|\buv\s+(?:run\s+--with|add|sync|tool\s+install)\b"
    r"|\bnpm\s+(?:install|ci|i)\b|\bnpx\b"
    r"|\bgit\s+clone\s+(?:\S+\s+)*(?:https?://|git@)"
    r"|\bcargo\s+install\b|\bgo\s+(?:install|get)\b",
)


@dataclass(frozen=True)
class Need:
    kind: str  # IMAGE | GPUS | INTERNET | COMPOSE | ARCH | TPU | OS
    detail: str  # the evidence, as the refusal quotes it
    where: str = ENVIRONMENT  # INTERNET only: ENVIRONMENT or ORACLE
    value: str = ""  # ARCH: the architecture needed; GPUS: how many


def shown(text: object, width: int = 80) -> str:
    """A value from a task file as one printable line (a task file is untrusted input)."""
    flat = str(text).encode("unicode_escape", "backslashreplace").decode("ascii")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def normalize_arch(text: str) -> str:
    """``linux/arm64/v8``, ``aarch64`` -> ``arm64``; ``x86_64`` -> ``amd64`` (Docker's names)."""
    t = text.strip().lower().removeprefix("linux/")
    return _ARCH.get(t, _ARCH.get(t.split("/")[0], t))


def host_arch() -> str:
    return normalize_arch(platform.machine() or "unknown")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    except OSError:
        return ""


def network_evidence(script: str) -> str | None:
    """The first line of a shell script that reaches the network, or None."""
    for line in script.splitlines():
        code = line.strip()
        if not code or code.startswith("#"):
            continue
        if _NETWORK.search(code):
            return code
    return None


def compose_services(root: Path) -> tuple[str, dict[str, Any]] | None:
    """(the compose file, its services) for a task that ships one; services empty when it cannot be read."""
    for rel in COMPOSE_FILES:
        p = root / rel
        if p.is_file():
            try:
                data = yaml.safe_load(_read(p)) or {}
            except yaml.YAMLError:
                return rel, {}
            services = data.get("services") if isinstance(data, dict) else None
            return rel, services if isinstance(services, dict) else {}
    return None


KINDS = (IMAGE, GPUS, INTERNET, COMPOSE, ARCH, TPU, OS)
#: Needs a task-set image's catalog recorded, by the task folder the controller wrote its metadata to: the
#: controller sees only the catalog, not the files the needs are read from. Kept in this process, never in a file
#: beside the task, which a task's author could write to hide a need.
_RECORDED: dict[str, list[Need]] = {}


def as_records(needs: list[Need]) -> list[dict[str, str]]:
    return [{"kind": n.kind, "detail": n.detail, "where": n.where, "value": n.value} for n in needs]


def from_records(records: object) -> list[Need]:
    """Needs a catalog recorded (an image's content: untrusted, so every string is flattened again)."""
    out = []
    for r in records if isinstance(records, list) else []:
        if isinstance(r, dict) and r.get("kind") in KINDS:
            where = ORACLE if r.get("where") == ORACLE else ENVIRONMENT
            out.append(Need(str(r["kind"]), shown(r.get("detail", ""), 200), where, shown(r.get("value", ""), 40)))
    return out


def remember(task_path: str, records: object) -> None:
    """The controller: the needs the catalog recorded for the task it wrote to ``task_path``."""
    _RECORDED[str(task_path)] = from_records(records)


def task_needs(task: Task) -> list[Need]:
    root = Path(task.path)
    if (recorded := _RECORDED.get(str(task.path))) is not None:  # a task-set image's: its files are not here
        return list(recorded)
    env = task.spec.environment
    needs: list[Need] = []
    compose = compose_services(root)
    if not env.runs_on_host:
        if env.docker_image:
            needs.append(Need(IMAGE, f"docker_image {shown(env.docker_image)}"))
        elif (root / "environment" / "Dockerfile").is_file():
            needs.append(Need(IMAGE, "environment/Dockerfile"))
        elif (root / "task.yaml").is_file() and (root / "Dockerfile").is_file():  # legacy, before `tasks import`
            needs.append(Need(IMAGE, "Dockerfile"))
        elif compose is not None and (named := _compose_image(compose)) is not None:  # its only image is compose's
            needs.append(Need(IMAGE, named))
    extra = env.model_extra or {}
    if env.gpus > 0:
        needs.append(Need(GPUS, f"{env.gpus} GPU(s)", value=str(env.gpus)))
    elif compose is not None and (gpu := _compose_gpus(compose)) is not None:  # Docker's own way to ask for one
        needs.append(Need(GPUS, gpu, value="1"))
    if isinstance(tpu := extra.get("tpu"), dict):
        needs.append(Need(TPU, f"tpu {shown(tpu.get('type'), 30)} {shown(tpu.get('topology'), 20)}"))
    if isinstance(os_ := extra.get("os"), str) and os_.lower() != "linux":
        needs.append(Need(OS, f"os = {shown(os_, 20)}", value=os_.lower()))
    needs += _network_needs(task, root)
    if compose is not None:
        rel, services = compose
        if not services:
            needs.append(Need(COMPOSE, f"{rel} (its services cannot be read)"))
        elif len(services) > 1:
            needs.append(Need(COMPOSE, f"{rel}: services {shown(', '.join(map(str, services)))}"))
    return needs + _arch_needs(root, compose)


def _compose_image(compose: tuple[str, dict[str, Any]]) -> str | None:
    """The evidence of an image a compose service names or builds (``image:`` without a variable, ``build:``)."""
    rel, services = compose
    for name, svc in services.items():
        if not isinstance(svc, dict):
            continue
        image = svc.get("image")
        if isinstance(image, str) and image and "$" not in image:
            return f"{rel}: {shown(name)} image {shown(image)}"
        if svc.get("build"):
            return f"{rel}: {shown(name)} build"
    return None


def _compose_gpus(compose: tuple[str, dict[str, Any]]) -> str | None:
    """A compose service that reserves a GPU (``deploy.resources.reservations.devices`` with capability ``gpu``, or
    ``runtime: nvidia``), the way a Terminal-Bench task asks Docker for one."""
    rel, services = compose
    for name, svc in services.items():
        if not isinstance(svc, dict):
            continue
        if svc.get("runtime") == "nvidia":
            return f"{rel}: {shown(name)} runtime nvidia"
        reservations: Any = svc
        for key in ("deploy", "resources", "reservations"):
            reservations = reservations.get(key) if isinstance(reservations, dict) else None
        devices = reservations.get("devices") if isinstance(reservations, dict) else None
        for dev in devices if isinstance(devices, list) else []:
            caps = dev.get("capabilities") if isinstance(dev, dict) else None
            flat = {str(c) for group in caps or [] for c in (group if isinstance(group, list) else [group])}
            if "gpu" in flat or (isinstance(dev, dict) and dev.get("driver") == "nvidia"):
                return f"{rel}: {shown(name)} reserves a GPU"
    return None


def _declared_network(section: Any, where: str) -> tuple[bool, str] | None:
    """(needs the internet, the evidence) from a section's allow_internet or Harbor's network_mode, or None."""
    extra = section.model_extra or {}
    if where == "[environment]" and "allow_internet" in section.model_fields_set:
        return section.allow_internet, "allow_internet = true"
    mode = extra.get("network_mode")
    if isinstance(mode, str):
        hosts = extra.get("allowed_hosts") or []
        listed = f" ({shown(', '.join(map(str, hosts)), 60)})" if hosts else ""
        prefix = "" if where == "[environment]" else f"{where} "
        return mode.lower() != "no-network", f"{prefix}network_mode = {shown(mode, 20)}{listed}"
    return None


def _network_needs(task: Task, root: Path) -> list[Need]:
    """The internet a task needs: as its author declares it (allow_internet, Harbor's network_mode for the whole
    environment or for the agent's or the verifier's phase), else as its scripts show it. A declared offline
    phase (false, ``no-network``) is a promise: its script is not read."""
    spec = task.spec
    env = _declared_network(spec.environment, "[environment]")
    if env is not None:  # the whole environment, every phase (one need: the trial's network)
        return [Need(INTERNET, env[1])] if env[0] else []
    needs = []
    for where, section, script, kind in (
        ("[verifier]", spec.verifier, "tests/test.sh", ENVIRONMENT),
        ("[agent]", spec.agent, "solution/solve.sh", ORACLE),  # solve.sh runs as the oracle agent
    ):
        said = _declared_network(section, where)
        if said is not None:
            if said[0]:
                needs.append(Need(INTERNET, said[1], where=kind))
        elif (line := network_evidence(_read(root / script))) is not None:
            needs.append(Need(INTERNET, f"{script}: {shown(line)}", where=kind))
    return needs


def _arch_needs(root: Path, compose: tuple[str, dict[str, Any]] | None) -> list[Need]:
    needs = []
    if compose is not None:
        rel, services = compose
        for name, svc in services.items():
            if isinstance(svc, dict) and isinstance(svc.get("platform"), str) and "$" not in svc["platform"]:
                arch = normalize_arch(svc["platform"])
                needs.append(Need(ARCH, f"{rel}: {shown(name)} platform {shown(svc['platform'])}", value=arch))
    for m in _FROM_PLATFORM.finditer(_read(root / "environment" / "Dockerfile")):
        if "$" not in m.group(1):  # $BUILDPLATFORM / $TARGETPLATFORM follow the machine that builds
            arch = normalize_arch(m.group(1))
            needs.append(Need(ARCH, f"environment/Dockerfile: FROM --platform={shown(m.group(1))}", value=arch))
    return needs


def declared_architecture(task: Task) -> str | None:
    """The one CPU architecture a task's files declare, or None (none, or several that disagree)."""
    return _declared_architecture(task.path, task.digest)


@functools.lru_cache(maxsize=4096)
def _declared_architecture(path: str, digest: str) -> str | None:  # once per task content, not once per try
    root = Path(path)
    recorded = _RECORDED.get(path)
    arch = recorded if recorded is not None else _arch_needs(root, compose_services(root))
    found = {n.value for n in arch if n.kind == ARCH}
    return found.pop() if len(found) == 1 else None
