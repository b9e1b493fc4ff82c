"""Deterministic service log for the crash-triage task.

``service.log.gz`` is a rotated log: a gzip file of many 1 MiB members, mostly
routine INFO traffic, a few ERROR lines, and exactly one FATAL line -- the crash
the agent must identify.  On ~45% of seeds the FATAL line is in the first
HEAD_MIB MiB; otherwise it is further in.

Two agent strategies exist (solution/triage.py): a lean one that only inspects
the head of the log (bounded memory; on a miss it blames the last ERROR it saw,
which is wrong), and a heavy one that decompresses the whole log in memory
(about 1.7-2.9x the memory spec) and always finds the FATAL line.
"""

from __future__ import annotations

import gzip
import random
import sys
from pathlib import Path

MIB = 1 << 20
SPEC_MB = 48
HEAD_MIB = 12
#: cgroup charge outside the decompressed buffer (bash + python), measured
BASE_MIB = 7.0
COMPONENTS = ["ledger", "payments", "auth", "search", "inventory", "notifier", "scheduler"]
FILLER = (
    b"2026-11-30T04:00:00Z INFO  http req=- method=GET path=/api/items status=200 dur=12ms\n"
    b"2026-11-30T04:00:00Z INFO  cache hit ratio=0.97 evictions=0 shard=3\n"
    b"2026-11-30T04:00:00Z INFO  scheduler tick lag=1ms queued=0 running=4\n"
)


def layout(seed: int) -> dict:
    r = random.Random(f"crash-triage:{seed}:layout")
    need = r.uniform(1.7, 2.9)  # heavy strategy's peak as a multiple of the spec
    total = max(HEAD_MIB + 4, int((need * SPEC_MB - BASE_MIB) / 2))
    early = r.random() < 0.45
    fatal_at = r.randint(2, HEAD_MIB - 2) if early else r.randint(HEAD_MIB + 1, total - 1)
    slots = [i for i in range(1, total) if i != fatal_at]
    errors = sorted(r.sample(slots, 8))
    errors[0] = 1  # the head always holds at least one ERROR
    def req() -> str:
        return f"req-{r.randrange(16**8):08x}"
    return {
        "total_mib": total,
        "fatal_at": fatal_at,
        "fatal": {"request_id": req(), "component": r.choice(COMPONENTS)},
        "errors": {i: {"request_id": req(), "component": r.choice(COMPONENTS)} for i in errors},
    }


def expected(seed: int) -> dict:
    return layout(seed)["fatal"]


def write_log(path: Path, seed: int) -> None:
    lay = layout(seed)
    filler = gzip.compress(FILLER * (MIB // len(FILLER)), 9, mtime=0)
    parts = []
    for i in range(lay["total_mib"]):
        parts.append(filler)
        if i in lay["errors"]:
            e = lay["errors"][i]
            parts.append(gzip.compress(
                f"2026-11-30T04:{i % 60:02d}:00Z ERROR {e['component']} req={e['request_id']} upstream timeout after 30000ms\n".encode(), mtime=0))
        if i == lay["fatal_at"]:
            f = lay["fatal"]
            parts.append(gzip.compress(
                f"2026-11-30T04:{i % 60:02d}:01Z FATAL {f['component']} req={f['request_id']} invariant violated: negative balance, aborting\n".encode(), mtime=0))
    path.write_bytes(b"".join(parts))


if __name__ == "__main__":
    write_log(Path(sys.argv[1]), int(sys.argv[2]))
