"""Verifier: recompute document frequencies from the seed and compare exactly."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from corpus import expected  # noqa: E402

want = expected(int(os.environ["HEADROOM_SEED"]))
try:
    got = json.loads((Path(os.environ["HEADROOM_WORKDIR"]) / "index.json").read_text())
except (OSError, ValueError) as exc:
    got = None
    print(f"no readable index.json: {exc}")
ok = got == want
if got is not None and not ok:
    print(f"documents got {got.get('documents')} want {want['documents']}; "
          f"{len(set(got.get('df', {}).items()) ^ set(want['df'].items()))} df entries differ")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
print("PASS" if ok else "FAIL")
