"""Oracle agent for dedup-index, with two strategies chosen per trial from the seed.

lean : dedup each page of the stream on its own (bounded memory; misses
       duplicates that span pages -> wrong answer on about half the inputs)
heavy: keep every key of the stream in one in-memory index (always right;
       needs ~2.2-4x the memory spec)
"""

import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from dataset import stream  # noqa: E402

seed = int(os.environ["HEADROOM_SEED"])
strategy = "heavy" if random.Random(f"dedup-index:{seed}:strategy").random() < 0.5 else "lean"
print(f"strategy: {strategy}", flush=True)

# Synthetic token/cost accounting, derived from the seed (no model is called).
r = random.Random(f"dedup-index:{seed}:tokens")
tokens_in = r.randint(9_000, 14_000) + (6_000 if strategy == "heavy" else 0)
tokens_out = r.randint(700, 1_600)
Path(os.environ["HEADROOM_AGENT_RESULT"]).write_text(json.dumps(
    {"tokens_in": tokens_in, "tokens_out": tokens_out,
     "cost_usd": round(tokens_in * 3e-6 + tokens_out * 15e-6, 6), "model": "synthetic-oracle"}))

dups: set[str] = set()
if strategy == "heavy":
    keys = "".join(stream(seed)).split("\n")
    seen: set[str] = set()
    add = seen.add
    for k in keys:
        if k in seen:
            dups.add(k)
        else:
            add(k)
    del keys, seen
else:
    for page in stream(seed):
        seen = set()
        for k in page.split("\n"):
            if k in seen:
                dups.add(k)
            else:
                seen.add(k)
dups.discard("")
Path("duplicates.txt").write_text("".join(k + "\n" for k in sorted(dups)))
print(f"{len(dups)} duplicated keys")
