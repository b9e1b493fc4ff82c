"""Oracle agent for csv-report: always right."""

import csv
import json

revenue: dict[str, int] = {}
units: dict[str, int] = {}
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        cents = int(row["quantity"]) * int(row["unit_price_cents"])
        revenue[row["region"]] = revenue.get(row["region"], 0) + cents
        units[row["product"]] = units.get(row["product"], 0) + int(row["quantity"])
top = sorted(units.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
with open("report.json", "w") as f:
    json.dump({"revenue_cents_by_region": dict(sorted(revenue.items())), "top_product_by_units": top}, f)
print("report written")
