"""One ssh connection per client: many streams over ``airlock daemon dial-stdio --mux``.

The remote side first writes the line ``airlock-mux 1 BUILD_ID GOOS GOARCH``,
then frames both ways (the Go package ``stdiomux``): a header of 9 bytes — the
type, the stream's number (big-endian uint32), the payload's length
(big-endian uint32) — then the payload. Types: open (this side's streams are
odd), data, window (the reader read that many bytes: uint32), close-write,
close (a payload is an error message). Each stream may have ``WINDOW`` bytes in
flight before its reader grants more, so a stream left unread holds up its own
writer only. Each stream is one connection to the daemon's socket, relayed by
the remote side: HTTP, streams and upgraded execs work on it as on a socket.

:class:`SyncMux` (threads) serves :class:`airlock.Client`, :class:`AsyncMux`
(asyncio) :class:`airlock.aio.AsyncClient`.
"""

from __future__ import annotations

import asyncio
import io
import struct
import subprocess
import threading
from collections.abc import Sequence
from typing import Any

from .errors import DaemonUnreachableError, ProtocolError

OPEN, DATA, WINDOW_UPDATE, CLOSE_WRITE, CLOSE = 1, 2, 3, 4, 5
HEADER = struct.Struct(">BII")
WINDOW = 256 << 10
MAX_DATA = 32 << 10
MAX_CONTROL = 4 << 10
HELLO = b"airlock-mux 1 "
_STDERR_MAX = 4 << 10


def hello_error(where: str, line: bytes, stderr: str) -> DaemonUnreachableError:
    """Why the remote side did not say the hello."""
    said = stderr.strip()
    if "unknown flag: --mux" in said:
        return DaemonUnreachableError(
            f"cannot reach the airlock daemon at {where}: the airlock there is older than this SDK (it has no "
            f"`daemon dial-stdio --mux`): update it, e.g. with `airlock remote install {where}` of the CLI")
    if said:
        return DaemonUnreachableError(f"cannot reach the airlock daemon at {where}: {said}")
    if line:
        return DaemonUnreachableError(f"cannot reach the airlock daemon at {where}: the remote command said "
                                      f"{line[:80]!r}, not the airlock hello")
    return DaemonUnreachableError(f"cannot reach the airlock daemon at {where}: the remote command ended")


def _frame(typ: int, sid: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(typ, sid, len(payload)) + payload


class _State:
    """What one stream knows, shared by the sync and asyncio streams."""

    def __init__(self, sid: int) -> None:
        self.id = sid
        self.buf = bytearray()
        self.unacked = 0
        self.send_window = WINDOW
        self.eof = False
        self.peer_closed = False
        self.peer_msg = ""
        self.closed = False
        self.wrote_eof = False
        self.err: BaseException | None = None

    def receive(self, data: bytes) -> None:
        if self.closed:
            return
        if len(self.buf) + self.unacked + len(data) > WINDOW:
            raise ProtocolError(f"stream {self.id} sent beyond its window")
        self.buf += data

    def apply(self, typ: int, payload: bytes) -> bool:
        """Takes in one frame of this stream; True once both sides closed it (the mux forgets it)."""
        if typ == DATA:
            self.receive(payload)
        elif typ == WINDOW_UPDATE and len(payload) == 4:
            self.send_window += struct.unpack(">I", payload)[0]
        elif typ == CLOSE_WRITE:
            self.eof = True
        elif typ == CLOSE:
            self.eof, self.peer_closed, self.peer_msg = True, True, payload.decode("utf-8", "replace")
        return typ == CLOSE and self.closed

    def take(self, n: int) -> tuple[bytes, int]:
        """Up to n buffered bytes, and the window to grant back for them (0: none yet)."""
        n = len(self.buf) if n < 0 else n
        data = bytes(self.buf[:n])
        del self.buf[:n]
        self.unacked += len(data)
        grant = 0
        if self.unacked >= WINDOW // 2 or (not self.buf and self.unacked):
            grant, self.unacked = self.unacked, 0
        return data, (0 if self.peer_closed else grant)

    def ended(self) -> bytes:
        """What a read returns with nothing buffered: b"" at the end, else raises."""
        if self.closed:
            raise OSError("the stream is closed")
        if self.eof and self.peer_msg:
            raise ConnectionError(self.peer_msg)
        if self.eof:
            return b""
        assert self.err is not None
        raise self.err

    def write_error(self) -> BaseException | None:
        if self.closed:
            return OSError("the stream is closed")
        if self.wrote_eof:
            return OSError("the stream was closed for writing")
        if self.err is not None:
            return self.err
        if self.peer_closed:
            return BrokenPipeError("the daemon closed the stream")
        return None


class _Stderr:
    """The first bytes of ssh's stderr."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.done = threading.Event()

    def add(self, b: bytes) -> None:
        if len(self.buf) < _STDERR_MAX:
            self.buf += b[:_STDERR_MAX - len(self.buf)]

    def text(self) -> str:
        return self.buf.decode("utf-8", "replace")


def _ended_error(where: str, e: BaseException | None, stderr: str) -> ConnectionError:
    msg = f"the ssh connection to {where} ended"
    if e is not None:
        msg += f" ({e})"
    if stderr.strip():
        msg += ": " + stderr.strip()
    return ConnectionError(msg)


class SyncMux:
    """The one ssh process of a sync client and its streams (threads)."""

    def __init__(self, argv: Sequence[str], where: str) -> None:
        self._where = where
        try:
            self._proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, bufsize=0)
        except OSError as e:
            raise DaemonUnreachableError(f"cannot reach the airlock daemon at {where}: {e}") from e
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._stderr = _Stderr()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self._r = io.BufferedReader(self._proc.stdout)  # type: ignore[arg-type]
        self._wlock = threading.Lock()
        self._lock = threading.Lock()
        self._streams: dict[int, SyncStream] = {}
        self._next = 1
        self.err: BaseException | None = None
        self._ended = threading.Event()
        line = self._r.readline()
        if not line.startswith(HELLO):
            self._stderr.done.wait(2)
            self._kill()
            raise hello_error(where, line, self._stderr.text())
        threading.Thread(target=self._read_loop, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        try:
            while b := self._proc.stderr.read(4096):
                self._stderr.add(b)
        except OSError:
            pass
        finally:
            self._stderr.done.set()

    @property
    def alive(self) -> bool:
        return self.err is None

    def open(self) -> SyncStream:
        with self._lock:
            if self.err is not None:
                raise self.err
            sid = self._next
            self._next += 2
            st = SyncStream(self, sid)
            self._streams[sid] = st
        self.write(OPEN, sid)
        return st

    def write(self, typ: int, sid: int, payload: bytes = b"") -> None:
        with self._wlock:
            if self.err is not None:
                raise self.err
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write(_frame(typ, sid, payload))
            except (OSError, ValueError) as e:
                # ssh ended: the reader sees it too, with what ssh said.
                self._ended.wait(3)
                self._end(e)
                raise self.err or ConnectionError(str(e)) from e

    def forget(self, sid: int) -> None:
        with self._lock:
            self._streams.pop(sid, None)

    def _read_loop(self) -> None:
        err: BaseException | None = None
        try:
            while True:
                hdr = self._r.read(HEADER.size)
                if len(hdr) < HEADER.size:
                    break
                typ, sid, n = HEADER.unpack(hdr)
                if n > (MAX_DATA if typ == DATA else MAX_CONTROL):
                    raise ProtocolError(f"a frame of type {typ} with {n} bytes")
                payload = self._r.read(n) if n else b""
                if len(payload) < n:
                    break
                with self._lock:
                    st = self._streams.get(sid)
                if st is not None:
                    st._on_frame(typ, payload)
                elif typ not in (DATA, WINDOW_UPDATE, CLOSE_WRITE, CLOSE):
                    raise ProtocolError(f"unknown frame type {typ}")
        except (OSError, ValueError, ProtocolError) as e:
            err = e
        self._stderr.done.wait(1)
        self._end(err)

    def _end(self, e: BaseException | None) -> None:
        with self._lock:
            if self.err is not None:
                return
            self.err = _ended_error(self._where, e, self._stderr.text())
            streams = list(self._streams.values())
            self._streams.clear()
        self._ended.set()
        for st in streams:
            st._fail(self.err)

    def _kill(self) -> None:
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.done.wait(2)
        try:
            if self._proc.stderr is not None:
                self._proc.stderr.close()
        except OSError:
            pass

    def close(self) -> None:
        """Ends ssh and every stream."""
        self._end(None)
        self._kill()


class _RawStream(io.RawIOBase):
    def __init__(self, st: SyncStream) -> None:
        self._st = st

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._st.recv(len(b))
        b[:len(data)] = data
        return len(data)


class SyncStream:
    """One stream, as much of a socket as http.client and the upgraded execs use."""

    def __init__(self, mux: SyncMux, sid: int) -> None:
        self._mux = mux
        self._s = _State(sid)
        self._cond = threading.Condition()
        self._reader = io.BufferedReader(_RawStream(self))

    def _on_frame(self, typ: int, payload: bytes) -> None:
        with self._cond:
            forget = self._s.apply(typ, payload)
            self._cond.notify_all()
        if forget:
            self._mux.forget(self._s.id)

    def _fail(self, err: BaseException) -> None:
        with self._cond:
            self._s.err = err
            self._cond.notify_all()

    def recv(self, n: int) -> bytes:
        with self._cond:
            s = self._s
            while not s.buf and not s.eof and not s.closed and s.err is None:
                self._cond.wait()
            if not s.buf:
                return s.ended()
            data, grant = s.take(n)
        if grant:
            try:
                self._mux.write(WINDOW_UPDATE, s.id, struct.pack(">I", grant))
            except OSError:
                pass
        return data

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while len(view):
            with self._cond:
                s = self._s
                while s.send_window == 0 and s.write_error() is None:
                    self._cond.wait()
                if (err := s.write_error()) is not None:
                    raise err
                n = min(len(view), s.send_window, MAX_DATA)
                s.send_window -= n
            self._mux.write(DATA, s.id, bytes(view[:n]))
            view = view[n:]

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return self._reader

    def settimeout(self, timeout: float | None) -> None:
        """Timeouts are not supported over ssh; ssh's own keep-alive options apply."""

    def setsockopt(self, *args: Any) -> None:
        """No socket options on a stream."""

    def shutdown(self, how: int) -> None:
        self.close()

    def close(self) -> None:
        with self._cond:
            s = self._s
            if s.closed:
                return
            s.closed = True
            s.buf.clear()
            self._cond.notify_all()
            peer_closed, err = s.peer_closed, s.err
        if peer_closed:
            self._mux.forget(s.id)
        if err is None:
            try:
                self._mux.write(CLOSE, s.id)
            except OSError:
                pass


class AsyncMux:
    """The one ssh process of an asyncio client and its streams."""

    _proc: asyncio.subprocess.Process | None
    _r: asyncio.StreamReader
    _w: asyncio.StreamWriter

    def __init__(self, where: str) -> None:
        self._where = where
        self._proc = None
        self._streams: dict[int, AsyncStream] = {}
        self._next = 1
        self.err: BaseException | None = None
        self._stderr = _Stderr()
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def start(cls, argv: Sequence[str], where: str) -> AsyncMux:
        m = cls(where)
        try:
            m._proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                           stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.PIPE, limit=1 << 20)
        except OSError as e:
            raise DaemonUnreachableError(f"cannot reach the airlock daemon at {where}: {e}") from e
        assert m._proc.stdout is not None and m._proc.stdin is not None
        m._r, m._w = m._proc.stdout, m._proc.stdin
        m._tasks.append(asyncio.ensure_future(m._read_stderr(m._proc)))
        line = await m._r.readline()
        if not line.startswith(HELLO):
            try:
                await asyncio.wait_for(m._tasks[0], 2)
            except asyncio.TimeoutError:
                pass
            await m.close()
            raise hello_error(where, line, m._stderr.text())
        m._tasks.append(asyncio.ensure_future(m._read_loop()))
        return m

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while b := await proc.stderr.read(4096):
            self._stderr.add(b)

    @property
    def alive(self) -> bool:
        return self.err is None

    async def open(self) -> AsyncStream:
        if self.err is not None:
            raise self.err
        sid = self._next
        self._next += 2
        st = AsyncStream(self, sid)
        self._streams[sid] = st
        await self.write(OPEN, sid)
        return st

    async def write(self, typ: int, sid: int, payload: bytes = b"") -> None:
        if self.err is not None:
            raise self.err
        try:
            self._w.write(_frame(typ, sid, payload))
            await self._w.drain()
        except (OSError, RuntimeError) as e:
            # ssh ended: the reader sees it too, with what ssh said.
            if len(self._tasks) > 1:
                try:
                    await asyncio.wait_for(asyncio.shield(self._tasks[1]), 3)
                except (asyncio.TimeoutError, asyncio.CancelledError):
                    pass
            self._end(e)
            raise self.err or ConnectionError(str(e)) from e

    def write_nowait(self, typ: int, sid: int, payload: bytes = b"") -> None:
        if self.err is None:
            try:
                self._w.write(_frame(typ, sid, payload))
            except (OSError, RuntimeError) as e:
                self._end(e)

    async def _read_loop(self) -> None:
        err: BaseException | None = None
        try:
            while True:
                hdr = await self._r.readexactly(HEADER.size)
                typ, sid, n = HEADER.unpack(hdr)
                if n > (MAX_DATA if typ == DATA else MAX_CONTROL):
                    raise ProtocolError(f"a frame of type {typ} with {n} bytes")
                payload = await self._r.readexactly(n) if n else b""
                st = self._streams.get(sid)
                if st is not None:
                    st._on_frame(typ, payload)
        except asyncio.IncompleteReadError:
            pass
        except (OSError, ProtocolError) as e:
            err = e
        try:
            await asyncio.wait_for(asyncio.shield(self._tasks[0]), 1)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        self._end(err)

    def _end(self, e: BaseException | None) -> None:
        if self.err is not None:
            return
        self.err = _ended_error(self._where, e, self._stderr.text())
        streams = list(self._streams.values())
        self._streams.clear()
        for st in streams:
            st._fail(self.err)

    async def close(self) -> None:
        """Ends ssh and every stream."""
        self._end(None)
        proc = self._proc
        if proc is not None:
            try:
                self._w.close()
            except (OSError, RuntimeError):
                pass
            try:
                await asyncio.wait_for(proc.wait(), 2)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        for t in self._tasks:
            t.cancel()


class AsyncStream:
    """One stream, as much of an asyncio StreamReader and StreamWriter as the transport uses."""

    def __init__(self, mux: AsyncMux, sid: int) -> None:
        self._mux = mux
        self._s = _State(sid)
        self._changed = asyncio.Event()
        self._pending = bytearray()

    def _on_frame(self, typ: int, payload: bytes) -> None:
        if self._s.apply(typ, payload):
            self._mux._streams.pop(self._s.id, None)
        self._changed.set()

    def _fail(self, err: BaseException) -> None:
        self._s.err = err
        self._changed.set()

    async def _wait_data(self) -> bool:
        """Waits for buffered bytes; False at the stream's end (raises on an error)."""
        s = self._s
        while not s.buf and not s.eof and not s.closed and s.err is None:
            self._changed.clear()
            await self._changed.wait()
        if s.buf:
            return True
        s.ended()
        return False

    def _take(self, n: int) -> bytes:
        data, grant = self._s.take(n)
        if grant:
            self._mux.write_nowait(WINDOW_UPDATE, self._s.id, struct.pack(">I", grant))
        return data

    # The reader's side.

    async def read(self, n: int = -1) -> bytes:
        if n == 0 or not await self._wait_data():
            return b""
        if n < 0:
            out = bytearray()
            while await self._wait_data():
                out += self._take(-1)
            return bytes(out)
        return self._take(n)

    async def readexactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            if not await self._wait_data():
                raise asyncio.IncompleteReadError(bytes(out), n)
            out += self._take(n - len(out))
        return bytes(out)

    async def readuntil(self, sep: bytes = b"\n") -> bytes:
        out = bytearray()
        while True:
            if not await self._wait_data():
                raise asyncio.IncompleteReadError(bytes(out), None)
            # Take up to the separator only: what follows stays buffered.
            start = max(0, len(out) - len(sep) + 1)
            i = (out[start:] + self._s.buf).find(sep)
            if i >= 0:
                out += self._take(start + i + len(sep) - len(out))
                return bytes(out)
            if len(out) > (1 << 20):
                raise asyncio.LimitOverrunError("no separator within 1 MiB", len(out))
            out += self._take(-1)

    async def readline(self) -> bytes:
        try:
            return await self.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:
            return e.partial

    # The writer's side.

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        view = memoryview(data)
        s = self._s
        while len(view):
            while s.send_window == 0 and s.write_error() is None:
                self._changed.clear()
                await self._changed.wait()
            if (err := s.write_error()) is not None:
                raise err
            n = min(len(view), s.send_window, MAX_DATA)
            s.send_window -= n
            await self._mux.write(DATA, s.id, bytes(view[:n]))
            view = view[n:]

    def close(self) -> None:
        s = self._s
        if s.closed:
            return
        s.closed = True
        s.buf.clear()
        self._changed.set()
        if s.peer_closed:
            self._mux._streams.pop(s.id, None)
        if s.err is None:
            self._mux.write_nowait(CLOSE, s.id)

    async def wait_closed(self) -> None:
        return None
