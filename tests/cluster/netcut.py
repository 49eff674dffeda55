"""A TCP relay between a client and the API server whose link the test can cut and mend.

It stands in for the network, not for the API server: bytes (TLS included) pass through
unchanged. ``cut()`` aborts every open connection and stops listening, so the client sees
resets and then ``connection refused``, as across a partition; ``mend()`` listens again on the
same port. ``freeze()`` makes it a hung server instead: connections stay open (new ones are
accepted) and nothing passes either way until ``thaw()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import urllib.parse
from pathlib import Path


class NetCut:
    """Relay ``127.0.0.1:<port>`` to the API server at URL ``server``; start with :meth:`start`."""

    def __init__(self, server: str) -> None:
        url = urllib.parse.urlsplit(server)
        self.target = (url.hostname, url.port)
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def start(self) -> NetCut:
        await self._listen()
        self.port = self._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, reuse_address=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        await self._flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        if self._server is None or writer not in self._open:  # cut while connecting upstream
            writer.transport.abort()
            up_writer.transport.abort()
            return
        self._open.add(up_writer)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    await self._flowing.wait()
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._open -= {writer, up_writer}

    async def cut(self) -> None:
        """Abort every connection through the relay and refuse new ones until :meth:`mend`."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for w in list(self._open):
            w.transport.abort()
        self._open.clear()
        if server is not None:
            await server.wait_closed()

    @property
    def connections(self) -> int:
        """How many connections (either side) the relay holds open now."""
        return len(self._open)

    async def freeze(self) -> None:
        """Hold every byte, both ways, and every new connection, until :meth:`thaw`: a server that
        accepts and never answers."""
        self._flowing.clear()

    async def thaw(self) -> None:
        self._flowing.set()

    async def mend(self) -> None:
        if self._server is None:
            await self._listen()

    async def close(self) -> None:
        await self.cut()

    def kubeconfig(self, original: Path, dest: Path) -> Path:
        """Write a copy of ``original`` whose server URL goes through the relay; return ``dest``."""
        text = original.read_text()
        dest.write_text(
            re.sub(r"server: https://127\.0\.0\.1:\d+", f"server: https://127.0.0.1:{self.port}", text)
        )
        return dest


class ThreadedNetCut:
    """A :class:`NetCut` on its own event loop thread, for synchronous tests; same methods, blocking."""

    def __init__(self, server: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="netcut", daemon=True)
        self._thread.start()
        self.net = self._call(NetCut(server).start())

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def cut(self) -> None:
        self._call(self.net.cut())

    def mend(self) -> None:
        self._call(self.net.mend())

    def freeze(self) -> None:
        self._call(self.net.freeze())

    def thaw(self) -> None:
        self._call(self.net.thaw())

    def kubeconfig(self, original: Path, dest: Path) -> Path:
        return self.net.kubeconfig(original, dest)

    def close(self) -> None:
        self._call(self.net.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
