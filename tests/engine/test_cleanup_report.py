"""`headroom cleanup` says "removed" only for what is gone (issue 19, item 6)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.cli_run import headroom as run_cli

pytestmark = pytest.mark.slow


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_cleanup_reports_a_work_dir_it_cannot_remove_as_kept(tmp_path: Path) -> None:
    root = Path(tempfile.gettempdir())
    stuck, gone = root / f"headroom-{_dead_pid()}", root / f"headroom-{_dead_pid()}"
    assert stuck != gone
    (stuck / "app").mkdir(parents=True)
    (gone / "app").mkdir(parents=True)
    pinned = stuck / "app" / "pinned"
    pinned.write_text("x")
    # An immutable file: not even root can delete it (the file system refuses), as a stuck mount would.
    if subprocess.run(["chattr", "+i", str(pinned)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this file system")
    try:
        res = run_cli("runs", "cleanup", "--backend", "local", timeout=120)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        # (any headroom starting on this machine reaps dead processes' work roots: another may have been first)
        assert not gone.exists()
        assert f"removed {stuck}" not in lines and stuck.exists()
        assert [line for line in lines if line.startswith(f"kept    {stuck} ")] == [
            f"kept    {stuck} (could not be removed: something in it refuses deletion)"
        ], res.stdout
    finally:
        subprocess.run(["chattr", "-i", str(pinned)], check=False)
        subprocess.run(["rm", "-rf", str(stuck), str(gone)], check=False)
