"""Oracle agent for crash-triage, with two strategies chosen per trial from the seed.

lean : look at the first 12 MiB of the log only (bounded memory); if no FATAL
       line is there, blame the last ERROR seen -- wrong on ~55% of inputs
heavy: decompress the whole log in memory and find the FATAL line (always
       right; needs ~1.7-2.9x the memory spec)
"""

import gzip
import json
import os
import random
import re
from pathlib import Path

seed = int(os.environ["HEADROOM_SEED"])
strategy = "heavy" if random.Random(f"crash-triage:{seed}:strategy").random() < 0.5 else "lean"
print(f"strategy: {strategy}", flush=True)

# Synthetic token/cost accounting, derived from the seed (no model is called).
r = random.Random(f"crash-triage:{seed}:tokens")
tokens_in = r.randint(6_000, 11_000) + (4_000 if strategy == "heavy" else 0)
tokens_out = r.randint(400, 1_200)
Path(os.environ["HEADROOM_AGENT_RESULT"]).write_text(json.dumps(
    {"tokens_in": tokens_in, "tokens_out": tokens_out,
     "cost_usd": round(tokens_in * 3e-6 + tokens_out * 15e-6, 6), "model": "synthetic-oracle"}))

LINE = re.compile(rb"(FATAL|ERROR) (\w+) req=(req-[0-9a-f]+)")
if strategy == "heavy":
    text = gzip.decompress(Path("service.log.gz").read_bytes())
else:
    with gzip.open("service.log.gz", "rb") as g:
        text = g.read(12 << 20)
i = text.find(b" FATAL ")
if i < 0:  # lean fallback: the last ERROR seen
    i = text.rfind(b" ERROR ")
m = LINE.search(text, max(0, i - 1)) if i >= 0 else None
del text
answer = {"request_id": m.group(3).decode(), "component": m.group(2).decode()} if m else {"request_id": None, "component": None}
Path("triage.json").write_text(json.dumps(answer))
print(f"blamed {answer}")
