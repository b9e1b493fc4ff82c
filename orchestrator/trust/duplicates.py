"""Exact and near-duplicate detection: normalized hashes, then MinHash/LSH (datasketch).

Near-duplicates are found through locality-sensitive hashing, never an
all-pairs loop: each text becomes a MinHash of its word shingles, an LSH index
proposes candidate pairs above the threshold, and each candidate's similarity
is then measured exactly (Jaccard of the shingle sets), so every finding
reports a true similarity and false candidates are dropped.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from datasketch import LeanMinHash, MinHash, MinHashLSH

from orchestrator.trust.texts import Item, normalize

NUM_PERM = 128


@dataclass(frozen=True)
class Finding:
    type: str  # "exact" | "near"
    scope: str  # "within" the set, or "external" against a reference file
    ids: tuple[str, str]
    similarity: float
    field: str  # "prompt" | "prompt+answer"
    reference: str | None = None  # the reference file, for external findings

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        d["ids"] = list(self.ids)
        return d


def shingles(text: str, k: int) -> set[bytes]:
    words = normalize(text).split()
    if len(words) < k:
        return {" ".join(words).encode()} if words else set()
    return {" ".join(words[i : i + k]).encode() for i in range(len(words) - k + 1)}


def _minhashes(sets: list[set[bytes]], chunk: int = 5000) -> Iterator[LeanMinHash]:
    """MinHashes of many shingle sets, computed in vectorized batches."""
    for start in range(0, len(sets), chunk):
        batch = sets[start : start + chunk]
        for m in MinHash.bulk([list(s) for s in batch], num_perm=NUM_PERM, seed=1):
            yield LeanMinHash(m)


def _jaccard(a: set[bytes], b: set[bytes]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _exact_key(text: str) -> str:
    return hashlib.sha256(normalize(text).encode()).hexdigest()


def exact_duplicates(items: list[Item], refs: list[Item], field: str) -> Iterator[Finding]:
    keys: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        keys[_exact_key(it.text)].append(it)
    for group in keys.values():
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                yield Finding("exact", "within", (group[i].id, group[j].id), 1.0, field)
    for r in refs:
        for it in keys.get(_exact_key(r.text), ()):
            yield Finding("exact", "external", (it.id, r.id), 1.0, field, r.source)


def near_duplicates(items: list[Item], refs: list[Item], field: str, threshold: float, k: int = 3) -> Iterator[Finding]:
    """Pairs with shingle Jaccard >= threshold that are not exact duplicates."""
    item_sh = [shingles(it.text, k) for it in items]
    keys = [_exact_key(it.text) for it in items]
    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    exact = set(keys)
    item_mh = list(_minhashes(item_sh))
    with lsh.insertion_session() as session:
        for idx, mh in enumerate(item_mh):
            session.insert(str(idx), mh)
    # within the set: each item queries the index of all items
    seen: set[tuple[int, int]] = set()
    for i, sh in enumerate(item_sh):
        for cand in lsh.query(item_mh[i]):
            j = int(cand)
            if j == i or (min(i, j), max(i, j)) in seen:
                continue
            seen.add((min(i, j), max(i, j)))
            if keys[i] == keys[j]:
                continue
            sim = _jaccard(sh, item_sh[j])
            if sim >= threshold:
                a, b = sorted((i, j))
                yield Finding("near", "within", (items[a].id, items[b].id), round(sim, 4), field)
    # against references: each reference queries the items' index
    for start in range(0, len(refs), 5000):
        chunk = refs[start : start + 5000]
        yield from _external(chunk, [shingles(r.text, k) for r in chunk], lsh, item_sh, items, exact, field, threshold)


def _external(
    refs: list[Item],
    ref_sh: list[set[bytes]],
    lsh: MinHashLSH,
    item_sh: list[set[bytes]],
    items: list[Item],
    exact: set[str],
    field: str,
    threshold: float,
) -> Iterator[Finding]:
    for r, rsh, mh in zip(refs, ref_sh, _minhashes(ref_sh), strict=True):
        if _exact_key(r.text) in exact:
            continue
        for cand in lsh.query(mh):
            j = int(cand)
            sim = _jaccard(rsh, item_sh[j])
            if sim >= threshold:
                yield Finding("near", "external", (items[j].id, r.id), round(sim, 4), field, r.source)


def template_clusters(findings: Iterable[Finding], ids: list[str]) -> list[dict[str, Any]]:
    """Connected components of within-set duplicates: proposed ``cluster_id`` groups (size >= 2)."""
    parent = {i: i for i in ids}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for f in findings:
        if f.scope == "within" and f.ids[0] in parent and f.ids[1] in parent:
            ra, rb = find(f.ids[0]), find(f.ids[1])
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = defaultdict(list)
    for i in ids:
        groups[find(i)].append(i)
    return [{"cluster_id": root, "members": sorted(m)} for root, m in sorted(groups.items()) if len(m) > 1]


def all_pairs_near(items: list[Item], refs: list[Item], threshold: float, k: int = 3) -> set[tuple[str, str]]:
    """The exhaustive baseline (for benchmarks and tests on small samples only)."""
    item_sh = [shingles(it.text, k) for it in items]
    out = set()
    for r in refs:
        rsh = shingles(r.text, k)
        sims = np.array([_jaccard(rsh, s) for s in item_sh])
        for j in np.nonzero(sims >= threshold)[0]:
            out.add((items[int(j)].id, r.id))
    return out
