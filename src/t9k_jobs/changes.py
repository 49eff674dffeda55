"""A version number that coroutines wait on: how a watching backend tells its readers that what it
holds has changed, without any of them polling (:class:`Changes`).

A backend that keeps jobs up to date by watching (the local runs' inotify watcher, a cluster's
informers) calls :meth:`Changes.bump` when anything it holds changed; a reader remembers the
version it last showed and awaits :meth:`Changes.wait` for a newer one. One bump wakes every
reader at once, whatever their number: the cost of a change does not grow with the readers.
"""

from __future__ import annotations

import asyncio


class Changes:
    """A version (an int, from 0) and a way to wait for a newer one. Use on one event loop."""

    def __init__(self) -> None:
        self.version = 0
        self._event: asyncio.Event | None = None

    def bump(self) -> int:
        """Note a change: the version goes up by one and every waiter wakes. Returns the version."""
        self.version += 1
        if self._event is not None:
            self._event.set()
            self._event = None
        return self.version

    async def wait(self, after: int, timeout: float | None = None) -> int:
        """The version once it is above ``after`` (at once when it already is), or the version as
        it is when ``timeout`` seconds (None: no limit) have passed without a change."""
        if self.version > after:
            return self.version
        if self._event is None:
            self._event = asyncio.Event()
        event = self._event
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return self.version


__all__ = ["Changes"]
