"""The asyncio client: :class:`AsyncClient`, beside the sync :class:`airlock.Client`.

The same methods with the same arguments, awaited; the same records, results
and errors. Streams are async iterators and ``async with`` blocks::

    import asyncio
import builtins
    import airlock.aio

    async def main() -> None:
        client = airlock.aio.AsyncClient()
        async with await client.create('[sandbox]\\nimage = "debian:12"\\n') as sb:
            print((await sb.run("echo hello")).stdout_text)
            async with sb.exec_stream(["sh", "-c", "echo one; sleep 1; echo two"]) as stream:
                async for frame in stream:
                    print(frame.stream, frame.text)

    asyncio.run(main())

It is the standard library only, as the sync client: asyncio streams over a
Unix socket, TCP and TLS; the ssh transport through an asyncio subprocess.
Both clients run the same operations (``airlock._ops``) and wire code
(``airlock._wire``); only the I/O differs.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Literal, TypeVar, overload

from . import _ops
from ._aioexecs import AsyncExec, AsyncExecOutput, AsyncOutputCallback, hand
from ._aiopty import AsyncDataCallback, AsyncPty
from ._aiotransport import AsyncResponse, AsyncTransport, AsyncUpgraded
from ._pty import pty_request
from ._files import AsyncFileWatch, AsyncFilesMixin
from ._lifetime import Seconds
from . import _snapshots
from ._snapshots import SnapshotInfo
from ._ops import DEFAULT_READY_TIMEOUT, DEFAULT_STOP_TIMEOUT, Flow
from ._wire import Command, EventCursor, ExecCursor, Manifest, Output, Request
from .errors import WaitTimeoutError
from .models import Event, ExecFrame, ExecInfo, ExecResult, Health, Pool, PoolList, SandboxInfo

__all__ = ["AsyncClient", "AsyncSandbox", "AsyncEventStream", "AsyncExecStream", "AsyncExec", "AsyncExecOutput",
           "AsyncFileWatch", "AsyncPty"]

log = logging.getLogger("airlock")

T = TypeVar("T")
S = TypeVar("S", bound="_Stream")


class _Stream:
    """A streamed answer, opened when first awaited, entered or read."""

    def __init__(self, transport: AsyncTransport, req: Request) -> None:
        self._t = transport
        self._req = req
        self._resp: AsyncResponse | None = None
        self._done = False

    async def _open(self: S) -> S:
        if self._resp is None and not self._done:
            self._resp = await self._t.send(self._req)
        return self

    def __await__(self: S) -> Generator[Any, None, S]:
        return self._open().__await__()

    async def __aenter__(self: S) -> S:
        return await self._open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stops reading and closes the connection."""
        self._done = True
        if self._resp is not None:
            resp, self._resp = self._resp, None
            await resp.close()

    #: For :func:`contextlib.aclosing`.
    aclose = close


class AsyncEventStream(_Stream):
    """An async iterator of a sandbox's :class:`Event` (see :class:`airlock.EventStream`).

    Use it as ``async with client.events(…) as events: async for ev in events``
    (or ``await`` it to open it, then :meth:`close` it).
    """

    def __init__(self, transport: AsyncTransport, req: Request, *, timeout: float | None = None) -> None:
        super().__init__(transport, req)
        self._cursor = EventCursor(timeout)

    @property
    def last_sequence(self) -> int:
        """The sequence of the last event read (0 before the first)."""
        return self._cursor.last_sequence

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Event:
        await self._open()
        while self._resp is not None:
            try:
                self._resp.set_timeout(self._cursor.time_left())
                line = await self._resp.readline()
                if not line:
                    break
                ev = self._cursor.take(line)
            except TimeoutError as e:
                await self.close()
                if isinstance(e, WaitTimeoutError):
                    raise
                raise self._cursor.timed_out() from e
            except OSError as e:
                await self.close()
                raise self._cursor.broken(e) from e
            except BaseException:
                await self.close()
                raise
            if ev is not None:
                return ev
        await self.close()
        raise StopAsyncIteration


class AsyncExecStream(_Stream):
    """A streamed exec: an async iterator of :class:`ExecFrame` (see :class:`airlock.ExecStream`)."""

    def __init__(self, transport: AsyncTransport, req: Request) -> None:
        super().__init__(transport, req)
        self._cursor = ExecCursor()

    @property
    def exec(self) -> ExecInfo | None:
        """The exec's record, once its frame was read."""
        return self._cursor.exec

    @property
    def exit_code(self) -> int | None:
        """The exit code, once the last frame was read."""
        return self._cursor.exit_code

    def __aiter__(self) -> AsyncExecStream:
        return self

    async def __anext__(self) -> ExecFrame:
        await self._open()
        while self._resp is not None:
            try:
                line = await self._resp.readline()
                frame = self._cursor.take(line) if line else None
            except OSError as e:
                await self.close()
                raise self._cursor.broken(e) from e
            except BaseException:
                await self.close()
                raise
            if not line:
                await self.close()
                self._cursor.ended()
                break
            if frame is not None:
                if frame.exit_code is not None:
                    await self.close()
                return frame
        raise StopAsyncIteration

    async def result(self) -> ExecResult:
        """Reads the frames left and returns the exit code with stdout and stderr (of the frames not yet read)."""
        out = Output()
        async for frame in self:
            out.add(frame.stream, frame.data)
        return out.result(self.exit_code, exec_id=self.exec.id if self.exec else "")


class AsyncClient:
    """A client of one airlock control daemon, for asyncio: :class:`airlock.Client`'s arguments and methods, awaited.

    Each request opens a connection of its own, so one client serves any
    number of tasks at once. ``async with AsyncClient() as client`` is allowed
    (it holds nothing to release).
    """

    def __init__(
        self,
        host: str | None = None,
        *,
        token: str | None = None,
        tls_ca: str | None = None,
        tls_context: ssl.SSLContext | None = None,
        timeout: float | None = 60.0,
        ssh_options: Sequence[str] = (),
        ssh_command: Sequence[str] = ("ssh",),
        remote_command: Sequence[str] = ("airlock", "daemon", "dial-stdio"),
    ) -> None:
        self._t: AsyncTransport = AsyncTransport.resolve(
            host, token=token, tls_ca=tls_ca, tls_context=tls_context, timeout=timeout, ssh_options=ssh_options,
            ssh_command=ssh_command, remote_command=remote_command)

    @property
    def address(self) -> str:
        """The daemon's address (a socket path, ``http://…``, ``ssh://…``)."""
        return self._t.describe()

    def __repr__(self) -> str:
        return f"airlock.aio.AsyncClient({self.address!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Ends the client's ssh connection, if it has one (:meth:`close`)."""
        await self.close()

    async def close(self) -> None:
        """Ends the client's one ssh connection, if it has one (an ssh:// address); a later request starts another."""
        await self._t.close()

    # The daemon.

    async def health(self) -> Health:
        """``GET /v1/health``: the daemon's pid, build, version, log and Engines."""
        return await self._run(_ops.health())

    async def metrics(self) -> str:
        """``GET /metrics``: the daemon's metrics in Prometheus' text format (:meth:`airlock.Client.metrics`)."""
        return await self._run(_ops.metrics())

    # Sandboxes.

    async def create(
        self,
        manifest: Manifest | None = None,
        *,
        project_dir: str | os.PathLike[str] | None = None,
        vars: Mapping[str, str] | None = None,
        id: str | None = None,
        labels: Mapping[str, str] | None = None,
        env: Mapping[str, str] | Sequence[str] | None = None,
        no_pool: bool = False,
        start: bool = True,
        wait: bool = True,
        timeout: float | None = DEFAULT_READY_TIMEOUT,
        keep_on_failure: bool = False,
        lifetime: Seconds | None = None,
        on_timeout: str | None = None,
        idle_timeout: Seconds | None = None,
        on_idle: str | None = None,
        from_snapshot: str | None = None,
    ) -> AsyncSandbox:
        """Creates a sandbox from a manifest and, by default, waits until it is ready (:meth:`airlock.Client.create`).

        ``async with await client.create(…) as sb:`` deletes it when the block ends.
        """
        info = await self._run(_ops.create(manifest, project_dir=project_dir, vars=vars, id=id, labels=labels,
                                           env=env, no_pool=no_pool, start=start, wait=wait, timeout=timeout, keep_on_failure=keep_on_failure,
                                           lifetime=lifetime, on_timeout=on_timeout, idle_timeout=idle_timeout,
                                           on_idle=on_idle, from_snapshot=from_snapshot))
        return AsyncSandbox(self, info)

    async def run(
        self,
        manifest: Manifest,
        cmd: Command,
        *,
        project_dir: str | os.PathLike[str] | None = None,
        vars: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
        env: Mapping[str, str] | Sequence[str] | None = None,
        workdir: str | None = None,
        id: str | None = None,
        labels: Mapping[str, str] | None = None,
        no_pool: bool = False,
        keep: bool = False,
        check: bool = False,
        timeout: float | None = DEFAULT_READY_TIMEOUT,
    ) -> ExecResult:
        """Runs a command in a sandbox of its own, as ``airlock run`` does (:meth:`airlock.Client.run`)."""
        return await self._run(_ops.run(manifest, cmd, project_dir=project_dir, vars=vars, stdin=stdin, env=env,
                                        workdir=workdir, id=id, labels=labels, no_pool=no_pool, keep=keep,
                                        check=check, timeout=timeout))

    def sandbox(self, sandbox_id: str) -> AsyncSandbox:
        """A handle of an existing sandbox (no request: ``await sb.refresh()`` reads its record)."""
        return AsyncSandbox(self, sandbox_id)

    async def get(self, sandbox_id: str) -> SandboxInfo:
        """``GET /v1/sandboxes/{id}``: a sandbox's record (:class:`SandboxNotFoundError` when none)."""
        return await self._run(_ops.get(sandbox_id))

    async def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """``GET /v1/sandboxes``: the sandboxes carrying every label given, deleted ones left out."""
        return await self._run(_ops.list_sandboxes(labels))

    def events(self, sandbox_id: str, *, from_seq: int | None = None, follow: bool = False,
               timeout: float | None = None) -> AsyncEventStream:
        """``GET /v1/sandboxes/{id}/events``: the events after sequence ``from_seq`` (all without it).

        With ``follow`` the stream then carries live events until closed.
        ``timeout`` bounds the whole read (:class:`WaitTimeoutError`). The
        request is sent when the stream is awaited, entered or first read.
        """
        req = _ops.events_request(sandbox_id, from_seq=from_seq, follow=follow)
        return AsyncEventStream(self._t, req, timeout=timeout)

    async def prune(self, *, dry_run: bool = False, all: bool = False) -> dict[str, Any]:
        """``POST /v1/prune``: removes (or, with ``dry_run``, lists) what ``airlock prune`` would."""
        return await self._run(_ops.prune(dry_run=dry_run, all=all))

    # Warm pools.

    async def pools(self) -> PoolList:
        """``GET /v1/pools``: the daemon's warm pools, their parked sandboxes, hits and misses."""
        return await self._run(_ops.pools())

    async def warm_pool(
        self,
        manifest: Manifest,
        *,
        project_dir: str | os.PathLike[str] | None = None,
        vars: Mapping[str, str] | None = None,
        size: int | None = None,
    ) -> Pool:
        """``POST /v1/pools/warm``: fills the warm pool of a manifest now and returns it once full."""
        return await self._run(_ops.warm_pool(manifest, project_dir=project_dir, vars=vars, size=size))

    async def drain_pools(self, *, project: str | os.PathLike[str] | None = None, all: bool = False) -> int:
        """``POST /v1/pools/drain``: removes the parked sandboxes of one project's pools (or ``all``) and returns how many."""
        return await self._run(_ops.drain_pools(project=project, all=all))

    # Snapshots (docs/snapshots.md): Sandbox.snapshot takes one, create(from_snapshot=…) starts one.

    async def snapshots(self) -> builtins.list[SnapshotInfo]:
        """``GET /v1/snapshots``: the daemon's snapshots, by name."""
        return await self._run(_snapshots.snapshots())

    async def delete_snapshot(self, name: str) -> SnapshotInfo:
        """``DELETE /v1/snapshots/{name}``: removes a snapshot's images (a ConflictError while a sandbox made from it exists)."""
        return await self._run(_snapshots.delete_snapshot(name))

    # Plumbing shared with AsyncSandbox: how this client does the steps of an operation (_ops).

    async def _run(self, flow: Flow[T]) -> T:
        """Runs an operation with asyncio."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            return await _ops.adrive(flow, lambda op: self._perform(op, tasks), _close)
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _perform(self, op: _ops.Op, tasks: set[asyncio.Task[None]]) -> object:
        if isinstance(op, _ops.Fetch):
            return await (await self._t.send(op.req)).read_all()
        if isinstance(op, _ops.Follow):
            return await AsyncEventStream(self._t, op.req, timeout=op.timeout)
        if isinstance(op, _ops.NextEvent):
            assert isinstance(op.stream, AsyncEventStream)
            return await anext(op.stream, None)
        if isinstance(op, _ops.Attach):
            return await self._t.attach(op.req)
        if isinstance(op, _ops.NextFrame):
            assert isinstance(op.conn, AsyncUpgraded)
            return await op.conn.read_frame()
        if isinstance(op, _ops.SendLater):
            conn, data = op.conn, op.data
            assert isinstance(conn, AsyncUpgraded)
            send_to = conn

            async def send() -> None:
                try:
                    await send_to.send(data)
                except OSError:
                    pass  # the command ended without reading it all

            tasks.add(asyncio.create_task(send(), name="airlock-stdin"))
            return None
        if isinstance(op, _ops.Close):
            await _close(op.handle)
            return None
        if isinstance(op, _ops.Offload):
            return await asyncio.to_thread(op.fn)
        raise TypeError(f"not an operation's step: {op!r}")

    async def _post_json(self, path: str, body: Any, method: str = "POST") -> Any:
        """A request with a JSON body; its answer's JSON."""
        return await self._run(_ops.post_json(path, body, method))

    async def _wait(self, sandbox_id: str, *, what: str, done: Callable[[str, str], bool],
                    timeout: float | None, gone_ok: bool = False) -> SandboxInfo | None:
        """Follows a sandbox's events until done(kind, state) holds for one (or its record)."""
        return await self._run(_ops.wait_until(sandbox_id, what=what, done=done, timeout=timeout, gone_ok=gone_ok))


async def _close(handle: object) -> None:
    if isinstance(handle, (_Stream, AsyncUpgraded, AsyncExecOutput)):
        await handle.close()


class AsyncSandbox(AsyncFilesMixin):
    """One sandbox, for asyncio: :class:`airlock.Sandbox`'s methods, awaited.

    Made by :meth:`AsyncClient.create` (or :meth:`AsyncClient.sandbox`). As an
    ``async with`` block it deletes the sandbox when the block ends, whether
    the block raised (or was cancelled) or not.
    """

    def __init__(self, client: AsyncClient, info: SandboxInfo | str) -> None:
        self.client: AsyncClient = client
        if isinstance(info, SandboxInfo):
            self.id: str = info.id
            self._info: SandboxInfo | None = info
        else:
            self.id = info
            self._info = None

    def __repr__(self) -> str:
        state = self._info.state if self._info else "?"
        return f"<airlock.aio.AsyncSandbox {self.id} ({state})>"

    # The record and the lifecycle.

    @property
    def info(self) -> SandboxInfo:
        """The record as last read. A handle of :meth:`AsyncClient.sandbox` has none before ``await sb.refresh()`` (:class:`LookupError`)."""
        if self._info is None:
            raise LookupError(f"sandbox {self.id}: its record was not read yet (await sb.refresh())")
        return self._info

    @property
    def state(self) -> Awaitable[str]:
        """The state now: ``await sb.state`` reads the record."""
        return self._state()

    async def _state(self) -> str:
        return (await self.refresh()).state

    async def refresh(self) -> SandboxInfo:
        """Reads the record again and returns it."""
        self._info = await self.client._run(_ops.get(self.id))
        return self._info

    async def wait_ready(self, timeout: float | None = DEFAULT_READY_TIMEOUT) -> SandboxInfo:
        """Waits until the sandbox is ready (:meth:`airlock.Sandbox.wait_ready`)."""
        self._info = await self.client._run(_ops.wait_ready(self.id, timeout))
        return self._info

    async def stop(self, *, wait: bool = True, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> SandboxInfo:
        """``POST …/stop``: stops the sandbox; with ``wait`` returns once it is stopped."""
        self._info = await self.client._run(_ops.stop(self.id, wait=wait, timeout=timeout))
        return self._info

    async def resume(self, *, wait: bool = True, timeout: float | None = DEFAULT_READY_TIMEOUT) -> SandboxInfo:
        """``POST …/resume``: starts a stopped sandbox again; with ``wait`` returns once it is ready."""
        self._info = await self.client._run(_ops.resume(self.id, wait=wait, timeout=timeout))
        return self._info

    async def delete(self, *, wait: bool = True, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> None:
        """``DELETE /v1/sandboxes/{id}``; with ``wait`` returns once it is deleted. One already gone is no error."""
        self._info = await self.client._run(_ops.delete(self.id, wait=wait, timeout=timeout)) or self._info

    async def set_timeout(self, timeout: Seconds | None, *, on_timeout: str | None = None) -> SandboxInfo:
        """``PATCH /v1/sandboxes/{id}``: the sandbox expires ``timeout`` seconds from now (:meth:`airlock.Sandbox.set_timeout`)."""
        self._info = await self.client._run(_ops.set_timeout(self.id, timeout, on_timeout=on_timeout))
        return self._info

    async def set_idle_timeout(self, idle_timeout: Seconds | None, *, on_idle: str | None = None) -> SandboxInfo:
        """``PATCH /v1/sandboxes/{id}``: the sandbox's own idle timeout (:meth:`airlock.Sandbox.set_idle_timeout`)."""
        self._info = await self.client._run(_ops.set_idle_timeout(self.id, idle_timeout, on_idle=on_idle))
        return self._info

    async def snapshot(self, name: str | None = None) -> SnapshotInfo:
        """``POST /v1/sandboxes/{id}/snapshots``: saves the files of its primary and services as a snapshot.

        ``name`` (lowercase letters, digits, ``.``, ``_``, ``-``) or one of the
        daemon's choosing. ``client.create(from_snapshot=snap.name)`` starts a
        sandbox of it; memory is not saved.
        """
        return await self.client._run(_snapshots.take_snapshot(self.id, name))

    async def fork(self, n: int | None = None, *, ids: Sequence[str] | None = None, wait: bool = True,
             timeout: float | None = DEFAULT_READY_TIMEOUT) -> list[AsyncSandbox]:
        """``POST /v1/sandboxes/{id}/fork``: ``n`` copies of this running sandbox, each its own (ready, with ``wait``).

        A file one copy writes is in no other. The fork's snapshot (``fork-…``)
        stays until :meth:`Client.delete_snapshot` once the copies are deleted.
        ``n`` defaults to one copy, or one for each of ``ids``, the copies' IDs.
        A fork is whole or nothing: when a copy cannot be made (an ID in use:
        :class:`IDAlreadyUsedError`) nothing of it stays.
        """
        return [AsyncSandbox(self.client, i) for i in await self.client._run(_snapshots.fork(self.id, n, ids=ids, wait=wait, timeout=timeout))]

    async def pause(self) -> SandboxInfo:
        """``POST …/pause``: the sandbox frozen in place, memory kept (:meth:`airlock.Sandbox.pause`)."""
        self._info = await self.client._run(_ops.pause(self.id))
        return self._info

    async def unpause(self) -> SandboxInfo:
        """``POST …/unpause``: a paused sandbox let go on where it was (:meth:`airlock.Sandbox.unpause`)."""
        self._info = await self.client._run(_ops.unpause(self.id))
        return self._info

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            await self.delete()
        except Exception as e:
            if exc is None:
                raise
            log.warning("airlock: cannot delete sandbox %s: %s", self.id, e)

    # Commands.

    def exec_stream(self, cmd: Command, *, stdin: bytes | str | None = None,
                    env: Mapping[str, str] | Sequence[str] | None = None, workdir: str | None = None,
                    id: str | None = None, timeout: float | None = None,
                    kill_grace: float | None = None) -> AsyncExecStream:
        """Runs a command and returns its frames as they come (:meth:`airlock.Sandbox.exec_stream`).

        ``async with sb.exec_stream(…) as stream: async for frame in stream``;
        the request is sent when the stream is awaited, entered or first read.
        """
        req = _ops.exec_request(self.id, cmd, stdin=stdin, env=env, workdir=workdir, id=id, timeout=timeout,
                                kill_grace=kill_grace)
        return AsyncExecStream(self.client._t, req)

    @overload
    async def run(self, cmd: Command, *, stdin: bytes | str | None = ...,
                  env: Mapping[str, str] | Sequence[str] | None = ..., workdir: str | None = ..., check: bool = ...,
                  id: str | None = ..., timeout: float | None = ..., kill_grace: float | None = ...,
                  on_stdout: AsyncOutputCallback | None = ..., on_stderr: AsyncOutputCallback | None = ...,
                  background: Literal[False] = ...) -> ExecResult: ...

    @overload
    async def run(self, cmd: Command, *, stdin: bytes | str | None = ...,
                  env: Mapping[str, str] | Sequence[str] | None = ..., workdir: str | None = ..., check: bool = ...,
                  id: str | None = ..., timeout: float | None = ..., kill_grace: float | None = ...,
                  on_stdout: AsyncOutputCallback | None = ..., on_stderr: AsyncOutputCallback | None = ...,
                  background: Literal[True]) -> AsyncExec: ...

    async def run(self, cmd: Command, *, stdin: bytes | str | None = None,
                  env: Mapping[str, str] | Sequence[str] | None = None, workdir: str | None = None,
                  check: bool = False, id: str | None = None, timeout: float | None = None,
                  kill_grace: float | None = None, on_stdout: AsyncOutputCallback | None = None,
                  on_stderr: AsyncOutputCallback | None = None, background: bool = False) -> ExecResult | AsyncExec:
        """Runs a command to its end and returns its exit code, stdout and stderr (:meth:`airlock.Sandbox.run`).

        ``on_stdout`` and ``on_stderr`` may be coroutine functions (awaited);
        with ``background`` it returns an :class:`AsyncExec` at once.
        """
        if background:
            info = await self.client._run(_ops.start_exec(self.id, cmd, stdin=stdin, env=env, workdir=workdir, id=id,
                                                          check=check, timeout=timeout, kill_grace=kill_grace))
            return AsyncExec(self, info, on_stdout=on_stdout, on_stderr=on_stderr)
        async with self.exec_stream(cmd, stdin=stdin, env=env, workdir=workdir, id=id, timeout=timeout,
                                    kill_grace=kill_grace) as s:
            out = Output()
            async for frame in s:
                out.add(frame.stream, frame.data)
                await hand(on_stdout if frame.stream == "stdout" else on_stderr if frame.stream == "stderr" else None,
                           frame.data)
            res = out.result(s.exit_code, exec_id=s.exec.id if s.exec else "")
        return res.check() if check else res

    async def execs(self, *, running: bool = False, limit: int | None = None) -> list[ExecInfo]:
        """``GET …/execs``: the sandbox's exec records, oldest first (:meth:`airlock.Sandbox.execs`)."""
        return await self.client._run(_ops.list_execs(self.id, running=running, limit=limit))

    async def exec(self, exec_id: str) -> AsyncExec:
        """The handle of one of the sandbox's execs, by its ID (:class:`ExecNotFoundError` when none)."""
        return AsyncExec(self, await self.client._run(_ops.get_exec(self.id, exec_id)))

    async def pty(self, cmd: Command | None = None, *, cols: int = 80, rows: int = 24,
                  env: Mapping[str, str] | Sequence[str] | None = None, workdir: str | None = None,
                  id: str | None = None, timeout: float | None = None, kill_grace: float | None = None,
                  on_data: AsyncDataCallback | None = None) -> AsyncPty:
        """Runs a command on a terminal of its own and returns it as it starts: an :class:`AsyncPty` (:meth:`airlock.Sandbox.pty`).

        ``async with await sb.pty("sh") as term``; ``on_data`` may be a coroutine function (awaited).
        """
        req = pty_request(self.id, cmd, cols=cols, rows=rows, env=env, workdir=workdir, id=id, timeout=timeout,
                          kill_grace=kill_grace)
        return AsyncPty(self, await self.client._t.attach(req), exec_id=id or "", on_data=on_data)

    # Files.

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        """Writes ``data`` (text is UTF-8) as the regular file ``path`` (absolute), with ``mode``."""
        await self.client._run(_ops.write_file(self.id, path, data, mode=mode))

    async def read_file(self, path: str) -> bytes:
        """The bytes of the regular file ``path``."""
        return await self.client._run(_ops.read_file(self.id, path))

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The regular file ``path`` as text."""
        return (await self.read_file(path)).decode(encoding)

    async def write_archive(self, path: str, archive: bytes | IO[bytes]) -> None:
        """Extracts a tar archive (bytes or a binary file, streamed) into the directory ``path``."""
        await self.client._run(_ops.write_archive(self.id, path, archive))

    async def read_archive(self, path: str) -> bytes:
        """A tar archive of ``path``."""
        return await self.client._run(_ops.read_archive(self.id, path))

    async def upload_dir(self, local_dir: str | os.PathLike[str], path: str) -> None:
        """Copies what the local directory holds into the sandbox's directory ``path`` (the tar is made in a thread)."""
        await self.client._run(_ops.upload_dir(self.id, local_dir, path))

    # Events.

    def events(self, *, from_seq: int | None = None, follow: bool = True,
               timeout: float | None = None) -> AsyncEventStream:
        """The sandbox's events after ``from_seq`` (all without it), followed live by default (:meth:`AsyncClient.events`)."""
        return self.client.events(self.id, from_seq=from_seq, follow=follow, timeout=timeout)
