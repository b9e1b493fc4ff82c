"""Deterministic sensor readings in imperial units for the unit-convert task."""

import json
import random
import sys

TO_SI = {"in": ("m", 0.0254), "ft": ("m", 0.3048), "lb": ("kg", 0.45359237), "oz": ("kg", 0.028349523125)}


def readings(seed: int) -> list[dict]:
    r = random.Random(f"unit-convert:{seed}")
    out = []
    for i in range(r.randint(150, 250)):
        unit = r.choice(["in", "ft", "lb", "oz", "degF"])
        out.append({"id": i, "value": round(r.uniform(-40 if unit == "degF" else 0.1, 250), 2), "unit": unit})
    return out


def to_si(value: float, unit: str) -> tuple[float, str]:
    if unit == "degF":
        return round((value - 32) * 5 / 9 + 273.15, 3), "K"
    si, k = TO_SI[unit]
    return round(value * k, 6), si


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(readings(int(sys.argv[2])), f)
