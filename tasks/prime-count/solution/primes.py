"""Oracle agent for prime-count: trial division, pure Python -- CPU-bound, tiny memory."""

import json
import os
import random

seed = int(os.environ["HEADROOM_SEED"])
r = random.Random(f"prime-count:{seed}")
lo = r.randrange(20_000_000, 60_000_000)
hi = lo + r.randrange(60_000, 90_000)


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7):
        if n % p == 0:
            return n == p
    d = 11
    while d * d <= n:
        if n % d == 0 or n % (d + 2) == 0:
            return False
        d += 6
    return True


count = sum(1 for n in range(lo, hi) if is_prime(n))
with open("primes.json", "w") as f:
    json.dump({"lo": lo, "hi": hi, "count": count}, f)
print(f"{count} primes in [{lo}, {hi})")
