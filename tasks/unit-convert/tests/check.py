"""Verifier: every reading converted to SI within 1e-3."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from readings import readings, to_si  # noqa: E402

want = {rd["id"]: to_si(rd["value"], rd["unit"]) for rd in readings(int(os.environ["HEADROOM_SEED"]))}
ok, bad = False, []
try:
    got = {g["id"]: (g["value"], g["unit"]) for g in json.loads((Path(os.environ["HEADROOM_WORKDIR"]) / "converted.json").read_text())}
    bad = [i for i, (v, u) in want.items() if i not in got or got[i][1] != u or abs(got[i][0] - v) > 1e-3]
    ok = not bad and len(got) == len(want)
except (OSError, ValueError, KeyError, TypeError) as exc:
    print(f"unreadable converted.json: {exc}")
print("PASS" if ok else f"FAIL: {len(bad)} readings wrong, e.g. ids {bad[:5]}")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
