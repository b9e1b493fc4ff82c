"""Verifier: check the checkpoint list's shape, then recompute three random segments and the last one."""

import hashlib
import os
import random
from pathlib import Path

seed = int(os.environ["HEADROOM_SEED"])
r = random.Random(f"hash-chain:{seed}")
length = r.randrange(1_750_000, 1_950_000) if r.random() < 0.15 else r.randrange(300_000, 700_000)
every = 50_000
ok, why = False, ""
try:
    lines = (Path(os.environ["HEADROOM_WORKDIR"]) / "chain.txt").read_text().split("\n")
    head = lines[0].split()
    points = [(int(a), bytes.fromhex(b)) for a, b in (ln.split() for ln in lines[1:] if ln.strip())]
    steps = list(range(0, length, every)) + [length]
    if head != [str(length), str(every)] or [p[0] for p in points] != steps:
        why = "wrong header or checkpoint positions"
    elif points[0][1] != hashlib.sha256(f"hash-chain:{seed}".encode()).digest():
        why = "wrong start"
    else:
        check = set(random.Random(f"verify:{seed}").sample(range(1, len(points)), min(3, len(points) - 1)))
        check.add(len(points) - 1)
        ok = True
        for i in sorted(check):
            h = points[i - 1][1]
            for _ in range(points[i][0] - points[i - 1][0]):
                h = hashlib.sha256(h).digest()
            if h != points[i][1]:
                ok, why = False, f"segment ending at {points[i][0]} does not chain"
                break
except (OSError, ValueError, IndexError) as exc:
    why = f"unreadable chain.txt: {exc}"
print("PASS" if ok else f"FAIL: {why}")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
