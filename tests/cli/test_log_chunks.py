"""A log download's chunks (t9k_jobs.sdk.view.log_chunks, both backends' ``open_raw_log``): every
line newline-ended, about ``block`` bytes a chunk, and the lines' iterator closed when the
download ends, early or not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from t9k_jobs.sdk.view import log_chunks


class Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.closed = False

    async def gen(self) -> AsyncIterator[str]:
        try:
            for line in self.lines:
                yield line
        finally:
            self.closed = True


def test_chunks_hold_whole_lines_of_about_a_block() -> None:
    source = Lines([f"line {i} é" for i in range(100)])

    async def read() -> list[bytes]:
        return [c async for c in log_chunks(source.gen(), block=100)]

    chunks = asyncio.run(read())
    assert b"".join(chunks).decode() == "".join(f"line {i} é\n" for i in range(100))
    assert all(c.endswith(b"\n") for c in chunks) and all(len(c) < 100 + 20 for c in chunks)
    assert len(chunks) >= 10 and source.closed


def test_a_download_stopped_early_closes_the_lines() -> None:
    source = Lines([f"line {i}" for i in range(1000)])

    async def first() -> bytes:
        chunks = log_chunks(source.gen(), block=50)
        got = await chunks.__anext__()
        await chunks.aclose()
        return got

    assert asyncio.run(first()).startswith(b"line 0\n") and source.closed
