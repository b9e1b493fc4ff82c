"""Duplicate audit at scale: 10,000 test texts against 100,000 train texts, MinHash/LSH vs all pairs.

Texts are synthetic (random words from a 20,000-word vocabulary, 40-120 words). Every
50th test text is a planted near-duplicate of a train text (5% of its words changed).
The baseline is the exhaustive all-pairs comparison, timed on a sample of test texts in
the same run and extrapolated; recall is measured on the planted pairs.

    python benchmarks/bench_audit.py [--test 10000] [--train 100000] [--sample 20]
"""

from __future__ import annotations

import argparse
import random
import time

from orchestrator.trust.duplicates import all_pairs_near, near_duplicates
from orchestrator.trust.texts import Item


def corpus(n_test: int, n_train: int, seed: int = 0) -> tuple[list[Item], list[Item], set[tuple[str, str]]]:
    rng = random.Random(seed)
    vocab = [f"tok{i}" for i in range(20_000)]
    train = [Item(f"train-{i}", " ".join(rng.choices(vocab, k=rng.randint(40, 120))), "train") for i in range(n_train)]
    test, planted = [], set()
    for i in range(n_test):
        if i % 50 == 0:
            src = train[rng.randrange(n_train)]
            words = src.text.split()
            for k in rng.sample(range(len(words)), max(1, len(words) // 20)):
                words[k] = rng.choice(vocab)
            test.append(Item(f"test-{i}", " ".join(words), "tasks"))
            planted.add((f"test-{i}", src.id))
        else:
            test.append(Item(f"test-{i}", " ".join(rng.choices(vocab, k=rng.randint(40, 120))), "tasks"))
    return test, train, planted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--test", type=int, default=10_000)
    ap.add_argument("--train", type=int, default=100_000)
    ap.add_argument("--sample", type=int, default=20, help="test texts for the all-pairs baseline")
    ap.add_argument("--threshold", type=float, default=0.5)
    args = ap.parse_args()
    test, train, planted = corpus(args.test, args.train)
    t0 = time.perf_counter()
    found = {f.ids for f in near_duplicates(test, train, "prompt", args.threshold) if f.scope == "external"}
    lsh_s = time.perf_counter() - t0
    recall = len(found & planted) / len(planted)
    sample = test[: args.sample]
    t0 = time.perf_counter()
    truth_sample = all_pairs_near(sample, train, args.threshold)
    base_s = (time.perf_counter() - t0) * len(test) / len(sample)
    sample_ids = {it.id for it in sample}
    lsh_sample = {p for p in found if p[0] in sample_ids}
    agree = len(lsh_sample & truth_sample) / len(truth_sample) if truth_sample else float("nan")
    print(f"texts: {len(test)} test x {len(train)} train, threshold {args.threshold}")
    print(
        f"MinHash/LSH audit:            {lsh_s:8.1f} s   recall of {len(planted)} planted near-duplicates: {recall:.3f}"
    )
    print(
        f"all-pairs (extrapolated from {len(sample)} test texts): {base_s:8.1f} s   ratio all-pairs / LSH: {base_s / lsh_s:.1f}x"
    )
    print(
        f"on the sample, LSH found {len(lsh_sample & truth_sample)}/{len(truth_sample)} of the all-pairs matches ({agree:.3f})"
    )


if __name__ == "__main__":
    main()
