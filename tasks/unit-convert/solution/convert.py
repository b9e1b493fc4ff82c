"""Oracle-with-flaws agent for unit-convert.

It stands in for a model that is right most of the time: on ~30% of seeds it
"remembers" the Fahrenheit conversion wrong (forgets the 32-degree offset), and
the verifier fails it -- whatever resources the trial had.  Writes synthetic
token and cost numbers, derived from the seed, to $HEADROOM_AGENT_RESULT.
"""

import json
import os
import random
from pathlib import Path

seed = int(os.environ["HEADROOM_SEED"])
r = random.Random(f"unit-convert:{seed}:agent")
mistaken = r.random() < 0.30
tokens_in, tokens_out = r.randint(2_500, 4_000), r.randint(300, 900)
Path(os.environ["HEADROOM_AGENT_RESULT"]).write_text(json.dumps(
    {"tokens_in": tokens_in, "tokens_out": tokens_out,
     "cost_usd": round(tokens_in * 3e-6 + tokens_out * 15e-6, 6), "model": "synthetic-oracle"}))

FACTORS = {"in": ("m", 0.0254), "ft": ("m", 0.3048), "lb": ("kg", 0.45359237), "oz": ("kg", 0.028349523125)}
out = []
for rd in json.loads(Path("readings.json").read_text()):
    v, u = rd["value"], rd["unit"]
    if u == "degF":
        si = round((v - (0 if mistaken else 32)) * 5 / 9 + 273.15, 3), "K"
    else:
        name, k = FACTORS[u]
        si = round(v * k, 6), name
    out.append({"id": rd["id"], "value": si[0], "unit": si[1]})
Path("converted.json").write_text(json.dumps(out))
print(f"converted {len(out)} readings" + (" (with a Fahrenheit slip)" if mistaken else ""))
