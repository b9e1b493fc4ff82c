"""Deterministic record stream for the dedup-index task.

The dataset is a stream of 16-hex-digit record keys served in chunks of
CHUNK_LINES lines (think: pages of an export API).  A handful of keys are
planted twice.  On about half of the seeds every duplicate pair lies within one
chunk ("near"); on the rest at least one pair spans chunks ("far").

Two agent strategies exist (see solution/dedup.py): a lean one that dedups
chunk by chunk in bounded memory and misses far duplicates, and a heavy one
that indexes the whole stream in memory (about 2.2-4x the task's memory
spec) and is always right -- if it is allowed the memory.
"""

from __future__ import annotations

import random

CHUNK_LINES = 50_000
SPEC_MB = 32
#: Stream length in pages.  Measured cgroup peak of the heavy strategy (bash +
#: python, key list + set index): 7 pages ~72 MiB (2.2x spec), 11 pages ~90 MiB
#: (2.8x), 13-14 pages ~130 MiB (4x: the set index doubles its table).
PAGE_CHOICES = (7, 8, 9, 10, 11, 13, 14)


def n_chunks(seed: int) -> int:
    return random.Random(f"dedup-index:{seed}:size").choice(PAGE_CHOICES)


def plants(seed: int) -> list[tuple[int, int, int, int]]:
    """(source chunk, source line, target chunk, target line) for each planted duplicate."""
    r = random.Random(f"dedup-index:{seed}:plants")
    n = n_chunks(seed)
    far = r.random() < 0.5
    out, used = [], set()
    for i in range(r.randint(3, 8)):
        while True:
            cs = r.randrange(n)
            ct = r.randrange(n) if (far and i < 2) else cs
            if ct == cs and far and i < 2:
                continue
            ls, lt = r.randrange(CHUNK_LINES), r.randrange(CHUNK_LINES)
            if (cs, ls) in used or (ct, lt) in used or (cs, ls) == (ct, lt):
                continue
            used.update({(cs, ls), (ct, lt)})
            out.append((cs, ls, ct, lt))
            break
    return out


def _raw(seed: int, c: int) -> bytes:
    return random.Random(f"dedup-index:{seed}:chunk:{c}").randbytes(8 * CHUNK_LINES)


def key(seed: int, c: int, line: int) -> str:
    return _raw(seed, c)[8 * line : 8 * line + 8].hex()


def chunk(seed: int, c: int, _plants: list | None = None) -> str:
    """Chunk ``c``: CHUNK_LINES keys, one per line, each line ending in a newline."""
    text = _raw(seed, c).hex("\n", 8) + "\n"
    for cs, ls, ct, lt in _plants if _plants is not None else plants(seed):
        if ct == c:
            text = text[: 17 * lt] + key(seed, cs, ls) + text[17 * lt + 16 :]
    return text


def stream(seed: int):
    p = plants(seed)
    for c in range(n_chunks(seed)):
        yield chunk(seed, c, p)


def expected(seed: int) -> list[str]:
    return sorted({key(seed, cs, ls) for cs, ls, _, _ in plants(seed)})
