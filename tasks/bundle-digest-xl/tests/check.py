"""Verifier: recompute the expected digest from the seed and compare exactly."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from bundle import expected  # noqa: E402

want = expected(int(os.environ["HEADROOM_SEED"]), int(sys.argv[1]))
try:
    got = json.loads((Path(os.environ["HEADROOM_WORKDIR"]) / "digest.json").read_text())
except (OSError, ValueError) as exc:
    got = None
    print(f"no readable digest.json: {exc}")
ok = got == want
if got is not None and not ok:
    for k in want:
        if got.get(k) != want[k]:
            print(f"mismatch in {k!r}: got {str(got.get(k))[:200]} want {str(want[k])[:200]}")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
print("PASS" if ok else "FAIL")
