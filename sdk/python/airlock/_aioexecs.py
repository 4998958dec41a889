"""The handle of a background exec for the asyncio client: :class:`AsyncExec` and :class:`AsyncExecOutput`.

:mod:`airlock._execs`' :class:`~airlock.Exec`, awaited; the requests and what
their answers mean are :mod:`airlock._ops`' (Exec control).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any

from . import _ops
from ._aiotransport import AsyncResponse, AsyncTransport
from ._execs import CHUNK
from ._wire import Request
from .errors import ProtocolError, WaitTimeoutError
from .models import ExecInfo, ExecResult

if TYPE_CHECKING:
    from .aio import AsyncSandbox

#: Called with each chunk of a command's output as it comes; a coroutine function is awaited.
AsyncOutputCallback = Callable[[bytes], Any]


async def hand(cb: AsyncOutputCallback | None, chunk: bytes) -> None:
    """Hands a chunk to a callback, awaiting what it returns if that is awaitable."""
    if cb is not None:
        res = cb(chunk)
        if inspect.isawaitable(res):
            await res


class AsyncExecOutput:
    """A background exec's output file as it comes: an async iterator of chunks (:class:`airlock.ExecOutput`).

    The request is sent when it is entered (``async with``), awaited or first read.
    """

    def __init__(self, transport: AsyncTransport, req: Request, exec_id: str) -> None:
        self._t = transport
        self._req = req
        self._exec_id = exec_id
        self._resp: AsyncResponse | None = None
        self._done = False

    async def _open(self) -> AsyncExecOutput:
        if self._resp is None and not self._done:
            self._resp = await self._t.send(self._req)
        return self

    def __await__(self) -> Generator[Any, None, AsyncExecOutput]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncExecOutput:
        return await self._open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> AsyncExecOutput:
        return self

    async def __anext__(self) -> bytes:
        await self._open()
        if self._resp is None:
            raise StopAsyncIteration
        try:
            chunk = await self._resp.read(CHUNK)
        except OSError as e:
            await self.close()
            raise ProtocolError(f"the output of exec {self._exec_id} broke: {e}") from e
        except BaseException:
            await self.close()
            raise
        if not chunk:
            await self.close()
            raise StopAsyncIteration
        return chunk

    async def read(self) -> bytes:
        """The chunks left, joined."""
        return b"".join([chunk async for chunk in self])

    async def close(self) -> None:
        """Stops reading and closes the connection."""
        self._done = True
        if self._resp is not None:
            resp, self._resp = self._resp, None
            await resp.close()

    #: For :func:`contextlib.aclosing`.
    aclose = close


class AsyncExec:
    """The handle of a background exec, for asyncio: :class:`airlock.Exec`'s methods, awaited.

    With ``on_stdout``/``on_stderr`` a task follows each output and hands every
    chunk to them (a coroutine function is awaited).
    """

    def __init__(self, sandbox: AsyncSandbox, info: ExecInfo, *, on_stdout: AsyncOutputCallback | None = None,
                 on_stderr: AsyncOutputCallback | None = None) -> None:
        self.sandbox: AsyncSandbox = sandbox
        self.id: str = info.id
        self._info = info
        self._followers: list[asyncio.Task[None]] = []
        for stream, cb in (("stdout", on_stdout), ("stderr", on_stderr)):
            if cb is not None:
                self._followers.append(asyncio.get_running_loop().create_task(
                    self._follow(stream, cb), name=f"airlock-exec-{stream}"))

    def __repr__(self) -> str:
        return f"<airlock.aio.AsyncExec {self.id} of sandbox {self.sandbox.id}>"

    async def _follow(self, stream: str, cb: AsyncOutputCallback) -> None:
        async with self.output(stream, follow=True) as out:
            async for chunk in out:
                await hand(cb, chunk)

    async def info(self) -> ExecInfo:
        """The exec's record now (:meth:`airlock.Exec.info`)."""
        self._info = await self.sandbox.client._run(_ops.get_exec(self.sandbox.id, self.id))
        return self._info

    @property
    def running(self) -> Awaitable[bool]:
        """Whether the exec has not ended yet: ``await ex.running`` reads the record."""
        return self._running()

    async def _running(self) -> bool:
        return (await self.info()).exit_code is None

    async def signal(self, signal: str | int) -> ExecInfo:
        """Sends ``signal`` to the exec's process group (:meth:`airlock.Exec.signal`)."""
        self._info = await self.sandbox.client._run(_ops.signal_exec(self.sandbox.id, self.id, signal))
        return self._info

    async def kill(self) -> ExecInfo:
        """Sends SIGKILL to the exec's process group."""
        return await self.signal("KILL")

    def output(self, stream: str = "stdout", *, start: int = 0, follow: bool = False) -> AsyncExecOutput:
        """An output file from byte ``start``, as chunks (:meth:`airlock.Exec.output`): ``async with ex.output() as out``."""
        req = _ops.output_request(self.sandbox.id, self.id, stream, start=start, follow=follow)
        return AsyncExecOutput(self.sandbox.client._t, req, self.id)

    async def wait(self, timeout: float | None = None) -> ExecResult:
        """Waits for the exec's end and returns its exit code and whole output (:meth:`airlock.Exec.wait`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        info = await self.sandbox.client._run(_ops.wait_exec(self.sandbox.id, self.id, timeout))
        if self._followers:
            left = None if deadline is None else max(deadline - time.monotonic(), 1.0)
            _, pending = await asyncio.wait(self._followers, timeout=left)
            if pending:
                raise WaitTimeoutError(f"the output of exec {self.id} is still being read")
            for t in self._followers:
                if not t.cancelled() and (e := t.exception()) is not None:
                    raise e
        self._info = info
        return await self.sandbox.client._run(_ops.exec_result(self.sandbox.id, info))
