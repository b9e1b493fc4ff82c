"""Deterministic sales ledger for the csv-report task (small; memory and CPU are not the point)."""

import csv
import random
import sys

REGIONS = ["north", "south", "east", "west", "central"]
PRODUCTS = ["anvil", "bolt", "cog", "dynamo", "escapement", "flywheel", "gimbal"]


def rows(seed: int) -> list[dict]:
    r = random.Random(f"csv-report:{seed}")
    out = []
    for i in range(r.randint(1500, 2500)):
        out.append({
            "order_id": f"o{i:05d}",
            "region": r.choice(REGIONS),
            "product": r.choice(PRODUCTS),
            "quantity": r.randint(1, 20),
            "unit_price_cents": r.randint(99, 49_999),
        })
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["order_id", "region", "product", "quantity", "unit_price_cents"])
        w.writeheader()
        w.writerows(rows(int(sys.argv[2])))
