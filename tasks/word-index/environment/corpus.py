"""Deterministic corpus generator for the word-index task.

The corpus is ~200 short documents plus a mailing-list archive appended as one
last document.  The archive is usually modest; with a seeded probability it is
huge, and an agent that tokenises a document in one ``str.split()`` builds a
list of millions of small string objects: a transient memory spike of many
small allocations (unlike bundle-digest's single big buffer).
"""

from __future__ import annotations

import gzip
import random
import sys
from pathlib import Path

MIB = 1 << 20
SYL = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "zu", "per", "tan", "dor", "bel", "qui", "fen", "gra"]
#: measured cgroup charge: bytes per archive word while the archive is tokenised, and the rest
BYTES_PER_WORD = 78.0
BASE_MIB = 9.0
SPEC_MB = 96


def vocabulary() -> list[str]:
    r = random.Random("word-index:vocab")
    words: set[str] = set()
    while len(words) < 1500:
        words.add("".join(r.choice(SYL) for _ in range(r.randint(1, 4))))
    return sorted(words)


def spike_factor(seed: int) -> float | None:
    r = random.Random(f"word-index:{seed}:spike")
    u = r.random()
    if u < 0.03:
        return r.uniform(3.2, 3.7)
    if u < 0.25:
        return r.uniform(1.1, 1.6)
    return None


def documents(seed: int) -> list[list[str]]:
    vocab = vocabulary()
    r = random.Random(f"{seed}:docs")
    return [r.choices(vocab, k=r.randint(120, 300)) for _ in range(r.randint(150, 250))]


def archive(seed: int) -> tuple[str, int]:
    """The archive paragraph and how many times it repeats."""
    vocab = vocabulary()
    r = random.Random(f"{seed}:archive")
    para = " ".join(r.choices(vocab, k=150) + [f"msgid{r.randrange(10**6)}"]) + "\n"
    n_words = len(para.split())
    f = spike_factor(seed)
    target_mib = f * SPEC_MB if f else r.uniform(0.2, 0.45) * SPEC_MB
    reps = max(1, int((target_mib - BASE_MIB) * MIB / BYTES_PER_WORD / n_words))
    return para, reps


def expected(seed: int) -> dict:
    docs = documents(seed)
    para, _ = archive(seed)
    df: dict[str, int] = {}
    for words in docs + [para.split()]:
        for w in set(words):
            df[w] = df.get(w, 0) + 1
    return {"documents": len(docs) + 1, "df": dict(sorted(df.items()))}


def write_corpus(path: Path, seed: int) -> None:
    docs = documents(seed)
    para, reps = archive(seed)
    head = "\n\n".join(" ".join(words) for words in docs) + "\n\n"
    block = 200
    member = gzip.compress((para * block).encode(), 9, mtime=0)
    tail = gzip.compress((para * (reps % block)).encode(), 9, mtime=0)
    path.write_bytes(gzip.compress(head.encode(), 6, mtime=0) + member * (reps // block) + tail)


if __name__ == "__main__":
    write_corpus(Path(sys.argv[1]), int(sys.argv[2]))
