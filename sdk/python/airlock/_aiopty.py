"""A command on a terminal for the asyncio client: :class:`AsyncPty`.

:mod:`airlock._pty`'s :class:`~airlock.Pty`, awaited; the request and the
frames are built there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._aioexecs import hand
from ._aiotransport import AsyncUpgraded
from ._pty import broken, ended_early, input_frames, pty_exit, resize_frame, signal_frame
from ._wire import FRAME_EXIT, FRAME_STDERR, FRAME_STDOUT
from .errors import InvalidStateError, WaitTimeoutError

if TYPE_CHECKING:
    from .aio import AsyncSandbox

#: Called with each chunk of the terminal's output as it comes; a coroutine function is awaited.
AsyncDataCallback = Callable[[bytes], Any]


class AsyncPty:
    """A command running on a terminal in the sandbox, for asyncio (:class:`airlock.Pty`'s methods, awaited).

    ``async with await sb.pty(…) as term``; ``async for chunk in term`` reads
    the output. A task reads the terminal from the start: output not read yet
    is kept; with ``on_data`` (a coroutine function is awaited) each chunk
    goes to it instead.
    """

    def __init__(self, sandbox: AsyncSandbox, conn: AsyncUpgraded, *, exec_id: str = "",
                 on_data: AsyncDataCallback | None = None) -> None:
        self.sandbox: AsyncSandbox = sandbox
        #: The exec's ID: the one asked for, else known once it ended (the exit frame says it).
        self.exec_id: str = exec_id
        self._conn = conn
        self._on_data = on_data
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._eof = False
        self._exit_code: int | None = None
        self._error: BaseException | None = None
        self._closing = False
        self._ended = False
        self._reader = asyncio.get_running_loop().create_task(self._read_frames(), name="airlock-pty")

    def __repr__(self) -> str:
        return f"<airlock.aio.AsyncPty {self.exec_id or '?'} of sandbox {self.sandbox.id}>"

    async def _read_frames(self) -> None:
        try:
            while True:
                try:
                    frame = await self._conn.read_frame()
                except OSError as e:
                    raise broken(e) from e
                if frame is None:
                    raise ended_early()
                typ, payload = frame
                if typ in (FRAME_STDOUT, FRAME_STDERR) and payload:
                    if self._on_data is not None:
                        await hand(self._on_data, payload)
                    else:
                        self._chunks.put_nowait(payload)
                elif typ == FRAME_EXIT:
                    self.exec_id, self._exit_code = pty_exit(payload)
                    self._ended = True
                    await self._conn.close()  # the daemon closes it after the exit frame anyway
                    return
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if not self._closing:
                self._error, self._ended = e, True
                await self._conn.close()  # an on_data that failed: the command is killed
        finally:
            self._chunks.put_nowait(None)

    @property
    def exit_code(self) -> int | None:
        """The exit code, once the command ended (None before)."""
        return self._exit_code

    async def write(self, data: bytes | str) -> None:
        """Types ``data`` (text is UTF-8) into the terminal (:meth:`airlock.Pty.write`)."""
        await self._send(input_frames(data), "write")

    async def resize(self, cols: int, rows: int) -> None:
        """Sets the terminal's size (the command gets SIGWINCH)."""
        await self._send(resize_frame(cols, rows), "resize")

    async def signal(self, signal: str | int) -> None:
        """Sends ``signal`` (``"TERM"``, ``"SIGINT"``, ``9``) to the command's process group."""
        await self._send(signal_frame(signal), "signal")

    async def kill(self) -> None:
        """Sends SIGKILL to the command's process group."""
        await self.signal("KILL")

    async def _send(self, frames: bytes, what: str) -> None:
        if self._closing:
            raise InvalidStateError(f"cannot {what}: the terminal was closed")
        if self._ended or self._reader.done():
            raise InvalidStateError(f"cannot {what}: the terminal's command ended")
        if not frames:
            return
        try:
            await self._conn.send(frames)
        except OSError as e:
            if self._ended or self._reader.done():
                raise InvalidStateError(f"cannot {what}: the terminal's command ended") from e
            raise broken(e) from e

    async def read(self, timeout: float | None = None) -> bytes:
        """The next chunk of the terminal's output; ``b""`` once the command ended and all was read (:meth:`airlock.Pty.read`)."""
        if self._on_data is not None:
            raise InvalidStateError("cannot read: the terminal's output goes to on_data")
        if self._eof:
            return b""
        try:
            async with asyncio.timeout(timeout):
                chunk = await self._chunks.get()
        except TimeoutError:
            raise WaitTimeoutError(f"no output from the terminal within {timeout} s") from None
        if chunk is None:
            self._eof = True
            return b""
        return chunk

    def __aiter__(self) -> AsyncPty:
        return self

    async def __anext__(self) -> bytes:
        if chunk := await self.read():
            return chunk
        raise StopAsyncIteration

    async def wait(self, timeout: float | None = None) -> int:
        """Waits for the command's end and returns its exit code (:meth:`airlock.Pty.wait`)."""
        done, _ = await asyncio.wait([self._reader], timeout=timeout)
        if not done:
            raise WaitTimeoutError(f"the terminal's command did not end within {timeout} s")
        if self._error is not None:
            raise self._error
        if self._exit_code is None:
            raise InvalidStateError("the terminal was closed before its command ended")
        return self._exit_code

    async def close(self) -> None:
        """Closes the terminal: a command still running is killed (SIGTERM, then SIGKILL after its grace)."""
        if not self._reader.done():
            self._closing = True
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        await self._conn.close()

    async def __aenter__(self) -> AsyncPty:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
