"""Task directories written on the fly, and whether real cgroups are here."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestrator.errors import CgroupUnavailable
from orchestrator.isolation import cgroups
from tests.cli_run import headroom as run_cli


def _cgroups_writable() -> bool:
    try:
        d = cgroups.detect("headroom-probe")
    except CgroupUnavailable:
        return False
    d.close()
    return True


CGROUPS = _cgroups_writable()
requires_cgroups = pytest.mark.skipif(not CGROUPS, reason="no writable cgroup hierarchy on this machine")


def write_task(
    root: Path,
    name: str,
    *,
    solve: str,
    test: str = 'if [ -f "$HEADROOM_WORKDIR/out" ]; then echo 1; else echo 0; fi > "$HEADROOM_LOGS_DIR/reward.txt"\n',
    cpus: float = 1,
    memory_mb: int = 64,
    agent_timeout: float = 20,
    verifier_timeout: float = 10,
    extra_toml: str = "",
) -> Path:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "task.toml").write_text(
        textwrap.dedent(f"""\
        version = "1.0"
        [environment]
        cpus = {cpus}
        memory_mb = {memory_mb}
        [agent]
        timeout_sec = {agent_timeout}
        [verifier]
        timeout_sec = {verifier_timeout}
        [provenance]
        item_id = "test/{name}"
        source = "headroom test suite"
        """)
        + extra_toml
    )
    (d / "instruction.md").write_text(f"Do {name}.\n")
    (d / "solution" / "solve.sh").write_text(solve)
    (d / "tests" / "test.sh").write_text(test)
    return d


HOG = "python3 -c \"b = b'x' * ({mb} * 1024 * 1024); open('$HEADROOM_WORKDIR/out', 'w').write('ok')\"\n"


def runs_sharing_nothing(tmp: Path, store: Path) -> dict[str, str]:
    """Three real sweeps into one store, for `headroom compare` on runs that cannot be compared.

    "base": tasks alpha+beta under 1x-strict and unbounded; "other_tasks": task gamma only (no shared task);
    "other_configs": alpha+beta under 1x/2x and 1x/3x (shared tasks, no shared configuration). Returns run ids.
    """

    from orchestrator.store.sqlite import Store

    steady = 'touch "$HEADROOM_WORKDIR/out"\n'
    ab, g = tmp / "ab", tmp / "g"
    for root, names in ((ab, ("alpha", "beta")), (g, ("gamma",))):
        for name in names:
            write_task(root, name, solve=steady)
    ids: dict[str, str] = {}
    for key, root, mult in (
        ("base", ab, "1,unbounded"),
        ("other_tasks", g, "1,unbounded"),
        ("other_configs", ab, "2,3"),
    ):
        res = run_cli(
            "sweep",
            str(root),
            "--multipliers",
            mult,
            "--attempts",
            "1",
            "--store",
            str(store),
            "--format",
            "none",
        )
        assert res.returncode == 0, res.stderr
        s = Store.open_existing(store)
        try:
            ids[key] = s.runs()[-1].run_id
        finally:
            s.close()
    return ids
