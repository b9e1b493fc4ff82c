"""Deterministic package index for the dep-resolve task.

``index.json.gz`` lists ~300 packages (several versions each, with
dependencies) plus a block of yanked historical releases.  Loading the index
with ``json.load`` materialises every entry as Python objects: a steady load of
roughly half the memory spec, and on ~22% of seeds (a mirror that kept its
whole history) a transient spike to 1.1-1.5x spec -- or, on ~3%, past 3x.
"""

from __future__ import annotations

import gzip
import random
import sys
from pathlib import Path

SPEC_MB = 128
#: measured: cgroup charge per yanked entry while the index is loaded, and the fixed part
BYTES_PER_ENTRY = 470.0
BASE_MIB = 5.0
YANKED = '{"name": "%s", "version": "0.0.0", "yanked": true, "requires": []},\n'


def spike_factor(seed: int) -> float | None:
    r = random.Random(f"dep-resolve:{seed}:spike")
    u = r.random()
    if u < 0.03:
        return r.uniform(3.2, 3.6)
    if u < 0.25:
        return r.uniform(1.1, 1.5)
    return None


def packages(seed: int) -> tuple[list[dict], list[str]]:
    """The live releases and the root requirements."""
    r = random.Random(f"dep-resolve:{seed}:graph")
    names = [f"pkg-{i:03d}" for i in range(300)]
    rel = []
    for i, name in enumerate(names):
        for minor in range(r.randint(1, 4)):
            deps = sorted(r.sample(names[i + 1 :], min(len(names) - i - 1, r.randint(0, 3))))
            rel.append({"name": name, "version": f"1.{minor}.0", "yanked": False, "requires": deps})
    roots = sorted(r.sample(names[:60], 5))
    return rel, roots


def yanked_entries(seed: int) -> int:
    f = spike_factor(seed)
    target = f * SPEC_MB if f else random.Random(f"dep-resolve:{seed}:size").uniform(0.35, 0.6) * SPEC_MB
    return max(1000, int((target - BASE_MIB) * (1 << 20) / BYTES_PER_ENTRY))


def expected(seed: int) -> list[str]:
    rel, roots = packages(seed)
    latest: dict[str, dict] = {}
    for p in rel:
        if p["name"] not in latest or tuple(map(int, p["version"].split("."))) > tuple(map(int, latest[p["name"]]["version"].split("."))):
            latest[p["name"]] = p
    todo, pinned = list(roots), {}
    while todo:
        n = todo.pop()
        if n not in pinned:
            pinned[n] = latest[n]["version"]
            todo.extend(latest[n]["requires"])
    return [f"{n}=={v}" for n, v in sorted(pinned.items())]


def write_index(path: Path, seed: int) -> None:
    import json

    rel, roots = packages(seed)
    head = '{"roots": %s, "packages": [\n' % json.dumps(roots)
    live = "".join(json.dumps(p) + ",\n" for p in rel)
    block = 2000
    member = gzip.compress((YANKED % "pkg-000" * block).encode(), 9, mtime=0)
    n = yanked_entries(seed)
    tail = (YANKED % "pkg-000") * (n % block) + '{"name": "pkg-000", "version": "0.0.0", "yanked": true, "requires": []}\n]}\n'
    path.write_bytes(
        gzip.compress((head + live).encode(), 6, mtime=0) + member * (n // block) + gzip.compress(tail.encode(), 9, mtime=0)
    )


if __name__ == "__main__":
    write_index(Path(sys.argv[1]), int(sys.argv[2]))
