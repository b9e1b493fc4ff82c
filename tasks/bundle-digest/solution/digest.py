"""Oracle agent for bundle-digest: read every log of the bundle and write digest.json.

Like many real scripts it reads each file whole (``gzip.decompress``), which is
fine for ordinary bundles and spikes memory when debug.log is huge.
"""

import gzip
import json
import os
from pathlib import Path

bundle = Path(os.environ["HEADROOM_WORKDIR"]) / "bundle"
by_status: dict[str, int] = {}
lat_by_path: dict[str, list[int]] = {}
requests = debug_lines = error_lines = 0
for f in sorted(bundle.glob("*.log.gz")):
    data = gzip.decompress(f.read_bytes())
    if f.name.startswith("access"):
        for line in data.decode().splitlines():
            _ts, _kind, path, status, lat = line.split()
            requests += 1
            by_status[status] = by_status.get(status, 0) + 1
            lat_by_path.setdefault(path, []).append(int(lat[:-2]))
    elif f.name.startswith("app"):
        error_lines += data.count(b" ERROR ")
    else:
        debug_lines += data.count(b" DEBUG ")
    del data
by_path = {}
for p, lats in sorted(lat_by_path.items()):
    lats.sort()
    by_path[p] = {"count": len(lats), "p95_ms": lats[max(0, -(-95 * len(lats) // 100) - 1)]}
digest = {
    "requests": requests,
    "by_status": dict(sorted(by_status.items())),
    "by_path": by_path,
    "debug_lines": debug_lines,
    "error_lines": error_lines,
}
Path("digest.json").write_text(json.dumps(digest, indent=1))
print(f"digest: {requests} requests, {debug_lines} debug lines")
