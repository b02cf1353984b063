"""Watching a completion queue's descriptor on event loops that cannot:
Windows' default loop (ProactorEventLoop) has no add_reader. A thread waits
in select() for the descriptor (a socket there) and runs the reader on the
loop; it waits again only once the reader has run, as a level-triggered
add_reader would call it."""
from __future__ import annotations

import asyncio
import select
import socket
import threading
from typing import Callable


class FdWatcher:
    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, reader: Callable[[], None]) -> None:
        self.loop = loop
        self.fd = fd
        self.reader = reader
        self.stop_r, self.stop_w = socket.socketpair()
        self.ran = threading.Event()
        self.ran.set()
        self.stopping = False
        self.thread = threading.Thread(target=self._watch, name="ratelimit-aio-watch", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while True:
            self.ran.wait()
            readable, _, _ = select.select([self.fd, self.stop_r], [], [])
            if self.stop_r in readable:
                return
            self.ran.clear()
            try:
                self.loop.call_soon_threadsafe(self._read)
            except RuntimeError:  # the loop is closed
                return

    def _read(self) -> None:
        try:
            self.reader()
        finally:
            self.ran.set()

    def close(self) -> None:
        """Stops the thread, which no longer touches the descriptor once this
        returns (a second close does nothing)."""
        if self.stopping:
            return
        self.stopping = True
        self.stop_w.send(b"x")
        self.ran.set()
        self.thread.join()
        self.stop_r.close()
        self.stop_w.close()
