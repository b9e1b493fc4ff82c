"""Deterministic support-bundle generator for the bundle-digest task family.

The bundle stands in for the files a container image would ship: the local
backend starts every trial from an empty working directory, so the agent first
materialises the input with ``setup.sh``.  Everything is derived from
HEADROOM_SEED, so the verifier can recompute the expected digest without
trusting anything the agent wrote.

Memory behaviour (the point of this task): reading ``debug.log.gz`` whole makes a
transient buffer of about twice its decompressed size (``gzip.decompress`` joins
its members).  Usually debug.log is small; with a seeded probability a "debug
storm" makes it large enough that the spike crosses the task's memory spec.
"""

from __future__ import annotations

import gzip
import random
import sys
from pathlib import Path

MIB = 1 << 20
PATHS = ["/api/login", "/api/search", "/api/items", "/api/cart", "/api/checkout", "/static/app.js", "/healthz"]
STATUSES = [200] * 16 + [201, 204, 301, 304, 400, 404, 429, 500, 502, 503]
STORM_LINE = b"2026-11-30T03:14:07Z DEBUG retry-loop worker=7 backoff=0ms upstream=cache-2 state=WAITING\n"
#: cgroup charge of bash + python + the parsed access log, outside the debug buffer (calibrated)
BASE_MIB = 8.0


def spike_factor(seed: int, family: str = "bundle-digest") -> float | None:
    """Peak memory as a multiple of the spec, or None for an ordinary bundle.

    ~22% of seeds: a debug storm peaking at 1.1-1.6x spec; ~3%: a runaway storm
    above 3x spec.  Independent of the configuration, so a paired comparison
    across configurations sees the same input.
    """
    r = random.Random(f"{family}:{seed}:spike")
    u = r.random()
    if u < 0.03:
        return r.uniform(3.2, 3.7)
    if u < 0.25:
        return r.uniform(1.1, 1.6)
    return None


def debug_mib(seed: int, spec_mb: int) -> int:
    f = spike_factor(seed)
    if f is None:
        frac = random.Random(f"{seed}:debug").uniform(0.12, 0.3)
        return max(1, int(spec_mb * frac))
    return max(1, int((f * spec_mb - BASE_MIB) / 2))


def access_lines(seed: int, n: int) -> list[tuple[str, str, int, int]]:
    r = random.Random(f"{seed}:access")
    out = []
    for i in range(n):
        path = r.choice(PATHS)
        status = r.choice(STATUSES)
        lat = int(r.lognormvariate(3.2, 0.8)) + 1
        out.append((f"2026-11-30T02:{i // 600 % 60:02d}:{i // 10 % 60:02d}Z", path, status, lat))
    return out


def n_access(seed: int) -> int:
    return random.Random(f"{seed}:n").randint(3000, 6000)


def expected(seed: int, spec_mb: int) -> dict:
    """The digest a correct agent produces (computed without building the bundle)."""
    rows = access_lines(seed, n_access(seed))
    by_status: dict[str, int] = {}
    lat_by_path: dict[str, list[int]] = {}
    for _, path, status, lat in rows:
        by_status[str(status)] = by_status.get(str(status), 0) + 1
        lat_by_path.setdefault(path, []).append(lat)
    by_path = {}
    for p, lats in sorted(lat_by_path.items()):
        lats.sort()
        by_path[p] = {"count": len(lats), "p95_ms": lats[max(0, -(-95 * len(lats) // 100) - 1)]}
    per_chunk = MIB // len(STORM_LINE)
    return {
        "requests": len(rows),
        "by_status": dict(sorted(by_status.items())),
        "by_path": by_path,
        "debug_lines": debug_mib(seed, spec_mb) * per_chunk,
        "error_lines": sum(1 for _, _, s, _ in rows if s >= 500),
    }


def write_bundle(out: Path, seed: int, spec_mb: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = access_lines(seed, n_access(seed))
    text = "".join(f"{ts} ACCESS {p} {s} {lat}ms\n" for ts, p, s, lat in rows).encode()
    (out / "access.log.gz").write_bytes(gzip.compress(text, 6))
    app = "".join(f"{ts} ERROR upstream {p} returned {s}\n" for ts, p, s, _ in rows if s >= 500).encode()
    (out / "app.log.gz").write_bytes(gzip.compress(app, 6))
    # The debug log: identical 1 MiB gzip members (log rotation appends members).
    chunk = STORM_LINE * (MIB // len(STORM_LINE))
    member = gzip.compress(chunk, 9, mtime=0)
    (out / "debug.log.gz").write_bytes(member * debug_mib(seed, spec_mb))


if __name__ == "__main__":
    write_bundle(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
