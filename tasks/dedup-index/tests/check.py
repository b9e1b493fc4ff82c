"""Verifier: the planted duplicates are known from the seed; the answer must match exactly."""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from dataset import expected  # noqa: E402

want = expected(int(os.environ["HEADROOM_SEED"]))
try:
    got = (Path(os.environ["HEADROOM_WORKDIR"]) / "duplicates.txt").read_text().split()
except OSError as exc:
    got = None
    print(f"no duplicates.txt: {exc}")
ok = got == want
if got is not None and not ok:
    print(f"got {len(got)} keys, want {len(want)}; missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
print("PASS" if ok else "FAIL")
