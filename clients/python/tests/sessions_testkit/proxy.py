"""A TCP proxy that cuts one connection mid-response: a dropped link, made on purpose."""

from __future__ import annotations

import asyncio
from typing import List, Optional
from urllib.parse import urlsplit


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to ``upstream``; the first connection to carry more than
    ``cut_after`` bytes from upstream is closed right there (once; later ones pass)."""

    def __init__(self, upstream: str, cut_after: int) -> None:
        parts = urlsplit(upstream)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self.cut_after = cut_after
        self.cuts = 0
        self._server: Optional[asyncio.Server] = None
        self._tasks: List[asyncio.Task[None]] = []

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self._host, self._port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, cut: bool) -> None:
            sent = 0
            try:
                while data := await src.read(65536):
                    if cut and self.cuts == 0 and sent + len(data) > self.cut_after:
                        self.cuts += 1
                        dst.write(data[: max(0, self.cut_after - sent)])
                        await dst.drain()
                        break
                    dst.write(data)
                    await dst.drain()
                    sent += len(data)
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                for w in (writer, up_writer):
                    w.close()

        tasks = [
            asyncio.ensure_future(pump(reader, up_writer, cut=False)),
            asyncio.ensure_future(pump(up_reader, writer, cut=True)),
        ]
        self._tasks.extend(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
