"""Oracle agent for dep-resolve: load the whole index, pin the newest live release of every needed package."""

import gzip
import json
from pathlib import Path

with gzip.open("index.json.gz", "rt") as f:
    index = json.load(f)  # every entry becomes a dict: the memory spike when the index is big
latest: dict[str, dict] = {}
for p in index["packages"]:
    if p["yanked"]:
        continue
    cur = latest.get(p["name"])
    if cur is None or tuple(map(int, p["version"].split("."))) > tuple(map(int, cur["version"].split("."))):
        latest[p["name"]] = p
roots = index["roots"]
del index
todo, pinned = list(roots), {}
while todo:
    n = todo.pop()
    if n not in pinned:
        pinned[n] = latest[n]["version"]
        todo.extend(latest[n]["requires"])
Path("lock.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(pinned.items())))
print(f"pinned {len(pinned)} packages")
