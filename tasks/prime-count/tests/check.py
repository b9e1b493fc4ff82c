"""Verifier: count primes in the seeded range with a segmented sieve (an independent method)."""

import json
import math
import os
import random
from pathlib import Path

seed = int(os.environ["HEADROOM_SEED"])
r = random.Random(f"prime-count:{seed}")
lo = r.randrange(20_000_000, 60_000_000)
hi = lo + r.randrange(60_000, 90_000)

root = math.isqrt(hi) + 1
small = bytearray(b"\x01") * (root + 1)
small[0:2] = b"\x00\x00"
for i in range(2, math.isqrt(root) + 1):
    if small[i]:
        small[i * i :: i] = bytes(len(range(i * i, root + 1, i)))
seg = bytearray(b"\x01") * (hi - lo)
for p in (i for i in range(2, root + 1) if small[i]):
    start = max(p * p, (lo + p - 1) // p * p)
    seg[start - lo :: p] = bytes(len(range(start - lo, hi - lo, p)))
want = {"lo": lo, "hi": hi, "count": sum(seg)}
try:
    got = json.loads((Path(os.environ["HEADROOM_WORKDIR"]) / "primes.json").read_text())
except (OSError, ValueError) as exc:
    got = None
    print(f"no readable primes.json: {exc}")
ok = got == want
print(f"got {got} want {want}")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
