"""Compression of artifact content: zstd, streamed both ways so no artifact is held twice in memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import zstandard

CODEC = "zstd"
LEVEL = 3  # zstd's default: fast enough to keep up with a log, a third of the size of text
CHUNK = 1 << 20


class Compressor:
    """Feed chunks, get the whole compressed blob at the end."""

    def __init__(self) -> None:
        self._obj = zstandard.ZstdCompressor(level=LEVEL).compressobj()
        self._parts: list[bytes] = []

    def feed(self, data: bytes) -> None:
        if data:
            self._parts.append(self._obj.compress(data))

    def finish(self) -> bytes:
        self._parts.append(self._obj.flush())
        return b"".join(self._parts)


def decompress_stream(codec: str, source: BinaryIO, chunk: int = CHUNK) -> Iterator[bytes]:
    """The content of a blob read from ``source`` (any object with ``read``), chunk by chunk."""
    if codec != CODEC:
        raise ValueError(f"artifact stored with codec {codec!r}, which this headroom cannot read")
    reader = zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True)
    while data := reader.read(chunk):
        yield data
