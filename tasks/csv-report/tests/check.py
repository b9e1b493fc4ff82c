"""Verifier: recompute the report from the seeded ledger (not from the agent's copy)."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["HEADROOM_TASK_DIR"], "environment"))
from sales import rows  # noqa: E402

revenue: dict[str, int] = {}
units: dict[str, int] = {}
for row in rows(int(os.environ["HEADROOM_SEED"])):
    revenue[row["region"]] = revenue.get(row["region"], 0) + row["quantity"] * row["unit_price_cents"]
    units[row["product"]] = units.get(row["product"], 0) + row["quantity"]
best = max(units.values())
want = {"revenue_cents_by_region": dict(sorted(revenue.items())),
        "top_product_by_units": min(p for p, u in units.items() if u == best)}
try:
    got = json.loads((Path(os.environ["HEADROOM_WORKDIR"]) / "report.json").read_text())
except (OSError, ValueError) as exc:
    got = None
    print(f"no readable report.json: {exc}")
ok = got == want
print(f"got {got}\nwant {want}")
Path(os.environ["HEADROOM_LOGS_DIR"], "reward.txt").write_text("1\n" if ok else "0\n")
