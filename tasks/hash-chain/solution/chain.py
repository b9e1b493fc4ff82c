"""Oracle agent for hash-chain: iterate SHA-256 and record checkpoints -- CPU-bound, tiny memory."""

import hashlib
import os
import random

seed = int(os.environ["HEADROOM_SEED"])
r = random.Random(f"hash-chain:{seed}")
# Most chains are short; ~15% are long (several times the CPU), and those need
# more than the 0.25-core spec to finish inside the agent timeout.
length = r.randrange(1_750_000, 1_950_000) if r.random() < 0.15 else r.randrange(300_000, 700_000)
every = 50_000
h = hashlib.sha256(f"hash-chain:{seed}".encode()).digest()
sha = hashlib.sha256
with open("chain.txt", "w") as out:
    out.write(f"{length} {every}\n0 {h.hex()}\n")
    done = 0
    while done < length:
        step = min(every, length - done)
        for _ in range(step):
            h = sha(h).digest()
        done += step
        out.write(f"{done} {h.hex()}\n")
print(f"chain of {length} done")
