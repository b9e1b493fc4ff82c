"""Verifier: the crash is known from the seed; request id and component must match."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from service_log import expected  # noqa: E402

want = expected(int(os.environ["HEADROOM_SEED"]))
try:
    got = json.loads((Path(os.environ["HEADROOM_WORKDIR"]) / "triage.json").read_text())
except (OSError, ValueError) as exc:
    got = None
    print(f"no readable triage.json: {exc}")
ok = got == want
print(f"got {got} want {want}")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
print("PASS" if ok else "FAIL")
