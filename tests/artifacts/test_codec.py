"""The artifact codec's reused compression context (issue 32): the same bytes as a fresh one, blob after blob."""

from __future__ import annotations

import io
import os
import threading

import zstandard

from orchestrator.artifacts.codec import CODEC, LEVEL, Compressor, decompress_stream


def _fresh(data: bytes) -> bytes:
    obj = zstandard.ZstdCompressor(level=LEVEL).compressobj()
    return obj.compress(data) + obj.flush()


def _blob(data: bytes) -> bytes:
    c = Compressor()
    c.feed(data)
    return c.finish()


def test_a_reused_context_gives_a_fresh_contexts_bytes_even_after_an_abandoned_blob() -> None:
    payloads = [b"", b"x", b"a small log line\n" * 3, os.urandom(5000), b"y" * 300_000]
    for p in payloads:
        assert _blob(p) == _fresh(p)
    abandoned = Compressor()  # an artifact whose read failed half-way: its frame is never finished
    abandoned.feed(os.urandom(70_000))
    for p in payloads:
        blob = _blob(p)
        assert blob == _fresh(p)
        assert b"".join(decompress_stream(CODEC, io.BytesIO(blob))) == p


def test_threads_each_compress_with_their_own_context() -> None:
    out: dict[int, bytes] = {}

    def work(i: int) -> None:
        data = bytes([i]) * 200_000 + os.urandom(1000)
        for _ in range(20):
            blob = _blob(data)
            assert b"".join(decompress_stream(CODEC, io.BytesIO(blob))) == data
        out[i] = blob

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 4
