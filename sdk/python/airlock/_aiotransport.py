"""How the asyncio client reaches the daemon: HTTP/1.1 over asyncio streams.

The same transports as the sync client's (``_transport``), with the same
rules (:class:`~airlock._transport.Target`): a Unix socket (the default one's
directory checked first), TCP with the token and TLS, or a stream of the
client's one ``ssh … airlock daemon dial-stdio --mux``, run as an asyncio
subprocess (:mod:`airlock._mux`). Every request opens a connection of its own
and closes it once its answer was read; the requests and what the
answers mean are the wire code both clients share (``_wire``).
"""

from __future__ import annotations

import asyncio
import io
import ssl
from dataclasses import dataclass, field
from collections.abc import Awaitable
from typing import IO, TypeVar, cast

from ._mux import AsyncMux
from ._transport import Target, check_runtime_dir
from ._wire import (BODY_CHUNK, FRAME_HEADER, UPGRADE_HEADERS, Request, chunk, encode_frames, frame_length, no_answer,
                    not_switched, unreachable)
from .errors import DaemonUnreachableError, ProtocolError, error_from_response

__all__ = ["AsyncTransport", "AsyncResponse", "AsyncUpgraded"]

#: The most a response's head may take.
_HEAD_MAX = 1 << 20

T = TypeVar("T")


async def _bounded(aw: Awaitable[T], timeout: float | None) -> T:
    """``await aw`` within ``timeout`` seconds (None: unbounded), else :class:`TimeoutError`.

    Not :func:`asyncio.wait_for`: on Python 3.11 it returns the result (and
    drops the cancellation) when the task is cancelled just as ``aw`` ends,
    so a cancelled ``create`` would go on waiting. :func:`asyncio.timeout`
    always lets a cancellation from outside through.
    """
    if timeout is None:
        return await aw
    async with asyncio.timeout(timeout):
        return await aw


class _Conn:
    """One connection: a reader, a writer, and the ssh process behind them when there is one."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 proc: asyncio.subprocess.Process | None = None) -> None:
        self.reader = reader
        self.writer = writer
        self.proc = proc
        self.closed = False

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.writer.close()
            await _bounded(self.writer.wait_closed(), 2)
        except (OSError, asyncio.TimeoutError):
            pass
        if self.proc is not None:
            # ssh ends once its standard input is closed.
            try:
                await _bounded(self.proc.wait(), 2)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()


class _Body:
    """A response's body as it comes: by its length, chunked, or until the connection closes."""

    def __init__(self, reader: asyncio.StreamReader, headers: dict[str, str], empty: bool) -> None:
        self._r = reader
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._left: int | None = None if self._chunked or length is None else int(length)
        self._chunk_left = 0
        self.eof = empty or self._left == 0
        self.buf = bytearray()

    async def fill(self) -> bool:
        """Reads more of the body into ``buf``; False at its end."""
        if self.eof:
            return False
        if self._chunked:
            if self._chunk_left == 0:
                line = await self._r.readline()
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise ProtocolError(f"a chunked body with a bad chunk size: {line[:40]!r}") from None
                if size == 0:
                    while (line := await self._r.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self.eof = True
                    return False
                self._chunk_left = size
            data = await self._r.read(min(self._chunk_left, BODY_CHUNK))
            if not data:
                raise ProtocolError("the answer ended within a chunk")
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                await self._r.readexactly(2)
        elif self._left is not None:
            data = await self._r.read(min(self._left, BODY_CHUNK))
            if not data:
                raise ProtocolError(f"the answer ended {self._left} bytes short of its length")
            self._left -= len(data)
            self.eof = self._left == 0
        else:
            data = await self._r.read(BODY_CHUNK)
            if not data:
                self.eof = True
                return False
        self.buf += data
        return True


class AsyncResponse:
    """An answer being read: its status, headers and body, and the connection it holds.

    Close it (``await resp.close()``, or ``async with``) once read;
    :meth:`read_all` closes it too.
    """

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str], body: _Body,
                 timeout: float | None) -> None:
        self._conn = conn
        self._body = body
        self._timeout = timeout
        self.status = status
        #: The headers, their names in lower case.
        self.headers = headers

    def set_timeout(self, timeout: float | None) -> None:
        """Bounds each later read of the body."""
        self._timeout = timeout

    async def _fill(self) -> bool:
        if self._timeout is None:
            return await self._body.fill()
        return await _bounded(self._body.fill(), self._timeout)

    async def read_all(self) -> bytes:
        """The whole body; closes the response."""
        try:
            while await self._fill():
                pass
            data = bytes(self._body.buf)
            self._body.buf.clear()
            return data
        finally:
            await self.close()

    async def read(self, n: int = -1) -> bytes:
        """Up to n bytes of the body (all with -1); b"" at its end."""
        if n < 0:
            while await self._fill():
                pass
        elif not self._body.buf:
            await self._fill()
        buf = self._body.buf
        data = bytes(buf if n < 0 else buf[:n])
        del buf[:len(data)]
        return data

    async def readline(self) -> bytes:
        """The next line of the body, with its newline (b"" at the end)."""
        buf = self._body.buf
        start = 0
        while (i := buf.find(b"\n", start)) < 0:
            start = len(buf)
            if not await self._fill():
                i = len(buf) - 1
                break
        line = bytes(buf[:i + 1])
        del buf[:i + 1]
        return line

    async def close(self) -> None:
        """Closes the connection."""
        await self._conn.close()

    async def __aenter__(self) -> AsyncResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncUpgraded:
    """A connection switched to the daemon's stream protocol: frames both ways (see :class:`airlock._transport.Upgraded`)."""

    def __init__(self, conn: _Conn) -> None:
        self._conn = conn
        self._send_lock = asyncio.Lock()

    async def send(self, data: bytes) -> None:
        """Sends bytes already framed (:func:`airlock._wire.encode_frames`)."""
        async with self._send_lock:
            self._conn.writer.write(data)
            await self._conn.writer.drain()

    async def send_frame(self, typ: int, payload: bytes = b"") -> None:
        """Sends one frame (a payload longer than a frame allows is split)."""
        await self.send(encode_frames(typ, payload))

    async def read_frame(self) -> tuple[int, bytes] | None:
        """The next frame's type and payload; None once the daemon closed the connection."""
        r = self._conn.reader
        try:
            hdr = await r.readexactly(FRAME_HEADER)
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                return None
            raise ProtocolError("the stream ended within a frame header") from None
        typ, n = frame_length(hdr)
        try:
            return typ, await r.readexactly(n)
        except asyncio.IncompleteReadError:
            raise ProtocolError("the stream ended within a frame") from None

    async def close(self) -> None:
        """Closes the connection."""
        await self._conn.close()

    async def __aenter__(self) -> AsyncUpgraded:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


@dataclass
class AsyncTransport(Target):
    """Sends requests to one daemon with asyncio. Made by :class:`airlock.aio.AsyncClient`.

    ``timeout`` bounds connecting, the answer's head and each read of an
    ordinary answer's body; over ssh only ssh's own options bound anything, as
    with the sync client.
    """

    _mux: AsyncMux | None = field(default=None, init=False, repr=False)
    _mux_lock: asyncio.Lock | None = field(default=None, init=False, repr=False)

    def _bound(self) -> float | None:
        return None if self.endpoint.scheme == "ssh" else self.timeout

    async def _mux_session(self) -> AsyncMux:
        """The client's one ssh connection, started on first use (again once it ended)."""
        if self._mux_lock is None:
            self._mux_lock = asyncio.Lock()
        async with self._mux_lock:
            if self._mux is None or not self._mux.alive:
                if self._mux is not None:
                    await self._mux.close()
                self._mux = await AsyncMux.start(self.ssh_argv() + ["--mux"], self.describe())
            return self._mux

    async def close(self) -> None:
        """Ends the client's ssh connection, if it has one."""
        if self._mux is not None:
            m, self._mux = self._mux, None
            await m.close()

    async def _connect(self) -> _Conn:
        ep = self.endpoint
        if ep.scheme == "unix":
            if self.check_runtime_dir:
                check_runtime_dir(ep.path)
            r, w = await asyncio.open_unix_connection(ep.path, limit=_HEAD_MAX)
            return _Conn(r, w)
        if ep.scheme == "ssh":
            st = await (await self._mux_session()).open()
            return _Conn(cast(asyncio.StreamReader, st), cast(asyncio.StreamWriter, st))
        ctx: ssl.SSLContext | None = None
        if ep.tls:
            ctx = self.tls_context or ssl.create_default_context()
        r, w = await asyncio.open_connection(ep.host, ep.port, ssl=ctx, server_hostname=ep.host if ctx else None,
                                             limit=_HEAD_MAX)
        return _Conn(r, w)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str | int] | list[tuple[str, str]] | None = None,
        body: bytes | IO[bytes] | None = None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
    ) -> AsyncResponse:
        """Sends a request and returns its answer once the status is read (:meth:`send` of a :class:`Request`)."""
        return await self.send(Request(method, path, query=query, body=body, headers=headers or {}, stream=stream))

    async def send(self, req: Request) -> AsyncResponse:
        """Sends a request and returns its answer once its head is read.

        An error status raises the :class:`airlock.AirlockError` its body names.
        With ``req.stream`` the body is read without a timeout; a body given as
        a file is sent chunked.
        """
        bound = self._bound()
        try:
            conn = await _bounded(self._connect(), bound)
        except DaemonUnreachableError:
            raise
        except (OSError, asyncio.TimeoutError) as e:
            raise DaemonUnreachableError(unreachable(self.describe(), e)) from e
        try:
            status, headers = await self._exchange(conn, req, bound)
        except BaseException as e:
            await conn.close()
            if isinstance(e, (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                              ValueError)):
                raise DaemonUnreachableError(no_answer(self.describe(), req, e)) from e
            raise
        body = _Body(conn.reader, headers, empty=status in (101, 204, 304) or req.method == "HEAD")
        resp = AsyncResponse(conn, status, headers, body, bound)
        if status >= 400:
            try:
                data = await resp.read_all()
            except (OSError, asyncio.TimeoutError, ProtocolError):
                data = b""
            finally:
                await resp.close()
            raise error_from_response(status, data)
        if req.stream:
            resp.set_timeout(None)
        return resp

    async def _exchange(self, conn: _Conn, req: Request, bound: float | None) -> tuple[int, dict[str, str]]:
        """Writes the request, reads the answer's head: its status and headers. ``bound`` limits each step."""
        w = conn.writer
        head = f"{req.method} {req.target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in self.head_fields(req))
        w.write(head.encode("latin-1") + b"\r\n")
        body = req.body
        if isinstance(body, (bytes, bytearray, memoryview)):
            w.write(bytes(body))
        elif body is not None:
            while True:
                piece = body.read(BODY_CHUNK) if isinstance(body, io.BytesIO) else \
                    await asyncio.to_thread(body.read, BODY_CHUNK)
                w.write(chunk(piece))
                await _bounded(w.drain(), bound)
                if not piece:
                    break
        await _bounded(w.drain(), bound)
        raw = await _bounded(conn.reader.readuntil(b"\r\n\r\n"), bound)
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(f"not an HTTP answer: {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return int(parts[1]), headers

    async def attach(self, req: Request) -> AsyncUpgraded:
        """Sends a request asking to switch to the stream protocol (101) and returns the frames' connection."""
        resp = await self.send(req)
        if resp.status != 101:
            await resp.close()
            raise not_switched(resp.status)
        return AsyncUpgraded(resp._conn)

    async def upgrade(self, path: str, body: bytes) -> AsyncUpgraded:
        """POSTs a JSON body asking to switch to the stream protocol (101), and returns the frames' connection."""
        return await self.attach(Request("POST", path, body=body, headers=UPGRADE_HEADERS, stream=True))
