"""Verifier: resolve the seeded graph directly (no index loading) and compare the lock file."""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from registry import expected  # noqa: E402

want = expected(int(os.environ["HEADROOM_SEED"]))
try:
    got = (Path(os.environ["HEADROOM_WORKDIR"]) / "lock.txt").read_text().split()
except OSError as exc:
    got = None
    print(f"no lock.txt: {exc}")
ok = got == want
print("PASS" if ok else f"FAIL: got {got[:5] if got else got}... want {want[:5]}...")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
