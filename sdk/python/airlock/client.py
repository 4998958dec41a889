"""The client of the airlock control daemon, and the handle of one sandbox."""

from __future__ import annotations

import builtins
import logging
import os
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Literal, TypeVar, overload

from . import _ops
from ._execs import Exec, ExecOutput, OutputCallback
from ._files import FilesMixin
from ._pty import DataCallback, Pty, pty_request
from ._lifetime import Seconds
from . import _snapshots
from ._snapshots import SnapshotInfo
from ._ops import DEFAULT_READY_TIMEOUT, DEFAULT_STOP_TIMEOUT, Flow
from ._transport import Response, Transport, Upgraded
from ._wire import Command, EventCursor, ExecCursor, Manifest, Output, Request
from .errors import WaitTimeoutError
from .models import Event, ExecFrame, ExecInfo, ExecResult, Health, Pool, PoolList, SandboxInfo

__all__ = ["Client", "Sandbox", "EventStream", "ExecStream", "Exec", "ExecOutput", "Pty", "Command", "Manifest"]

log = logging.getLogger("airlock")

T = TypeVar("T")


class EventStream:
    """An iterator of a sandbox's :class:`Event`, read as the daemon sends them.

    Without follow it ends after the history; with follow it stays open and
    yields live events until :meth:`close` (or the end of a ``with`` block, or a
    ``break`` out of a ``for`` loop over it followed by close). A follow that
    fell behind ends with an event of kind ``stream.error``: follow again from
    the last sequence read (:attr:`last_sequence`).
    """

    def __init__(self, resp: Response, *, timeout: float | None = None) -> None:
        self._resp: Response | None = resp
        self._cursor = EventCursor(timeout)

    @property
    def last_sequence(self) -> int:
        """The sequence of the last event read (0 before the first)."""
        return self._cursor.last_sequence

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        while self._resp is not None:
            try:
                left = self._cursor.time_left()
                if left is not None:
                    self._resp.set_timeout(left)
                line = self._resp.readline()
                if not line:
                    break
                ev = self._cursor.take(line)
            except TimeoutError as e:
                self.close()
                if isinstance(e, WaitTimeoutError):
                    raise
                raise self._cursor.timed_out() from e
            except OSError as e:
                self.close()
                raise self._cursor.broken(e) from e
            except BaseException:
                self.close()
                raise
            if ev is not None:
                return ev
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Stops reading and closes the connection."""
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ExecStream:
    """A streamed exec: an iterator of :class:`ExecFrame` as the command writes.

    The first frame carries the exec's record (also in :attr:`exec`), then come
    the output frames, the last carries the exit code (also in
    :attr:`exit_code`). :meth:`result` reads what is left and returns the whole
    output. Closing the stream early kills the command (SIGTERM, then SIGKILL);
    run it with ``background=True`` to keep it.
    """

    def __init__(self, resp: Response) -> None:
        self._resp: Response | None = resp
        self._cursor = ExecCursor()

    @property
    def exec(self) -> ExecInfo | None:
        """The exec's record, once its frame was read."""
        return self._cursor.exec

    @property
    def exit_code(self) -> int | None:
        """The exit code, once the last frame was read."""
        return self._cursor.exit_code

    def __iter__(self) -> Iterator[ExecFrame]:
        return self

    def __next__(self) -> ExecFrame:
        while self._resp is not None:
            try:
                line = self._resp.readline()
                frame = self._cursor.take(line) if line else None
            except OSError as e:
                self.close()
                raise self._cursor.broken(e) from e
            except BaseException:
                self.close()
                raise
            if not line:
                self.close()
                self._cursor.ended()
                break
            if frame is not None:
                if frame.exit_code is not None:
                    self.close()
                return frame
        raise StopIteration

    def result(self) -> ExecResult:
        """Reads the frames left and returns the exit code with stdout and stderr (of the frames not yet read)."""
        out = Output()
        for frame in self:
            out.add(frame.stream, frame.data)
        return out.result(self.exit_code, exec_id=self.exec.id if self.exec else "")

    def close(self) -> None:
        """Stops receiving and closes the connection."""
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def __enter__(self) -> ExecStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """A client of one airlock control daemon.

    ``host`` says where the daemon listens (else ``AIRLOCK_HOST``, else the
    user's Unix socket, as the airlock CLI finds it; its directory must be a
    real directory of the user's own with mode 0700, else
    :class:`UnsafeRuntimeDirError`), by the airlock CLI's rule:

    - ``unix:///path/airlockd.sock`` or an absolute path: a Unix socket;
    - ``tcp://HOST:PORT``: TCP, with ``token`` (else ``AIRLOCK_TOKEN``) sent
      as ``Authorization: Bearer``; over TLS unless HOST is loopback and no
      CA is given, verified with the CA file ``tls_ca`` (else
      ``AIRLOCK_TLS_CA``, else the system's) or ``tls_context``;
    - ``https://HOST:PORT``: the same, always TLS; ``http://HOST:PORT``:
      plain, on a loopback HOST only (else :class:`ValueError`);
    - ``ssh://[USER@]HOST[:PORT]``: runs ``ssh USER@HOST airlock daemon dial-stdio``
      and speaks HTTP over its standard input and output (``ssh_options`` are
      added to ssh's command line, ``ssh_command`` replaces ``ssh``,
      ``remote_command`` replaces ``airlock daemon dial-stdio``).

    ``timeout`` bounds connecting and each read of an ordinary answer; streams
    (events, streamed execs) are read without it.
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
        self._t: Transport = Transport.resolve(
            host, token=token, tls_ca=tls_ca, tls_context=tls_context, timeout=timeout, ssh_options=ssh_options,
            ssh_command=ssh_command, remote_command=remote_command)

    @property
    def address(self) -> str:
        """The daemon's address (a socket path, ``http://…``, ``ssh://…``)."""
        return self._t.describe()

    def __repr__(self) -> str:
        return f"airlock.Client({self.address!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        """Ends the client's ssh connection, if it has one (:meth:`close`)."""
        self.close()

    def close(self) -> None:
        """Ends the client's one ssh connection, if it has one (an ssh:// address); a later request starts another."""
        self._t.close()

    # The daemon.

    def health(self) -> Health:
        """``GET /v1/health``: the daemon's pid, build, version, log and Engines."""
        return self._run(_ops.health())

    def metrics(self) -> str:
        """``GET /metrics``: the daemon's metrics in Prometheus' text format (docs/metrics.md), as it wrote them.

        Creates by launch (warm, cold) and backend, sandboxes by state, the
        warm pools, exec starts, the store, the daemon's process.
        """
        return self._run(_ops.metrics())

    # Sandboxes.

    def create(
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
    ) -> Sandbox:
        """Creates a sandbox from a manifest and, by default, waits until it is ready.

        ``manifest`` is the text of a sandbox.toml (sent as ``manifest_toml``), a
        dict of the same structure (sent as ``manifest_doc``), or the path of a
        sandbox.toml (its text is sent). ``project_dir`` is a directory on the
        daemon's host; without it the daemon makes an empty one, removed with the
        sandbox. ``vars`` give the values of ``${NAME}`` in the manifest. ``id``
        is the sandbox's ID (else the daemon makes one); ``labels`` are kept on
        its record (``list(labels=…)`` filters on them). ``env`` adds variables
        (a dict, or ``"NAME=VALUE"`` strings) over the manifest's ``[env]`` for
        every command run in it.

        When the manifest has a warm pool (``[sandbox.pool]``, docs/pool.md)
        the sandbox is one of its parked sandboxes when one is ready: ``id``,
        ``labels``, ``env`` and ``vars`` are given to it then, without a cold
        start (its events have ``pool.claimed``); ``no_pool`` starts it cold.

        The sandbox runs no main command: it idles, with the manifest's daemons,
        until stopped. With ``wait`` this returns once it is ready (or raises
        :class:`SandboxFailedError` or :class:`WaitTimeoutError` after
        ``timeout`` seconds, deleting the sandbox unless ``keep_on_failure``);
        without it, as soon as the daemon accepted it (state ``pending``).

        Use the result as a context manager to have it deleted at the end::

            with client.create(toml_text) as sb:
                sb.run("make test")

        ``lifetime`` (seconds, or a timedelta) gives the sandbox a deadline:
        that long after it was accepted it is deleted, or stopped with
        ``on_timeout="stop"``. ``idle_timeout`` has it deleted (or stopped,
        ``on_idle="stop"``, or paused, ``on_idle="pause"``) once ready and unused that long, instead of the
        daemon's ``runtime.idle_ttl``. :meth:`Sandbox.set_timeout` and
        :meth:`Sandbox.set_idle_timeout` change them later.

        ``from_snapshot`` instead of ``manifest`` makes the sandbox of a
        snapshot (:meth:`Sandbox.snapshot`): the manifest it recorded, with its
        images for the primary and each service.
        """
        info = self._run(_ops.create(manifest, project_dir=project_dir, vars=vars, id=id, labels=labels, env=env,
                                     no_pool=no_pool, start=start, wait=wait, timeout=timeout,
                                     keep_on_failure=keep_on_failure, lifetime=lifetime, on_timeout=on_timeout,
                                     idle_timeout=idle_timeout, on_idle=on_idle, from_snapshot=from_snapshot))
        return Sandbox(self, info)

    def run(
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
        """Runs a command in a sandbox of its own, as ``airlock run`` does, and returns its exit code and output.

        The sandbox is made from ``manifest`` (with ``project_dir`` and
        ``vars``, as :meth:`create` takes them), runs ``cmd`` as its main
        command (a list of arguments, or a string run by ``sh -c``) with the
        manifest's daemons, and is removed once the command exited (``keep``
        keeps it, stopped: its files, events and logs stay until deleted).
        ``stdin`` is the command's whole standard input (else it reads
        ``/dev/null``); ``env`` adds variables; ``workdir`` is where it runs.

        A manifest with a warm pool (``[sandbox.pool]``, or one filled by
        :meth:`warm_pool`) has the run take one of the pool's parked
        sandboxes when it matches: then only the command starts, and the
        sandbox's events have ``pool.claimed``. ``no_pool`` starts it cold.

        ``timeout`` bounds the wait for the sandbox to be made (an image pull
        included), not the command. With ``check`` a non-zero exit code raises
        :class:`CommandFailedError`. The result's ``sandbox_id`` names the sandbox.
        """
        return self._run(_ops.run(manifest, cmd, project_dir=project_dir, vars=vars, stdin=stdin, env=env,
                                  workdir=workdir, id=id, labels=labels, no_pool=no_pool, keep=keep, check=check,
                                  timeout=timeout))

    def sandbox(self, sandbox_id: str) -> Sandbox:
        """A handle of an existing sandbox (its record is read on first use)."""
        return Sandbox(self, sandbox_id)

    def get(self, sandbox_id: str) -> SandboxInfo:
        """``GET /v1/sandboxes/{id}``: a sandbox's record (:class:`SandboxNotFoundError` when none)."""
        return self._run(_ops.get(sandbox_id))

    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """``GET /v1/sandboxes``: the sandboxes carrying every label given, deleted ones left out."""
        return self._run(_ops.list_sandboxes(labels))

    def events(self, sandbox_id: str, *, from_seq: int | None = None, follow: bool = False,
               timeout: float | None = None) -> EventStream:
        """``GET /v1/sandboxes/{id}/events``: the events after sequence ``from_seq`` (all without it).

        With ``follow`` the stream then carries live events until closed.
        ``timeout`` bounds the whole read (:class:`WaitTimeoutError`).
        """
        req = _ops.events_request(sandbox_id, from_seq=from_seq, follow=follow)
        return EventStream(self._t.send(req), timeout=timeout)

    def prune(self, *, dry_run: bool = False, all: bool = False) -> dict[str, Any]:
        """``POST /v1/prune``: removes (or, with ``dry_run``, lists) what ``airlock prune`` would."""
        return self._run(_ops.prune(dry_run=dry_run, all=all))

    # Warm pools.

    def pools(self) -> PoolList:
        """``GET /v1/pools``: the daemon's warm pools (docs/pool.md), their parked sandboxes, hits and misses."""
        return self._run(_ops.pools())

    def warm_pool(
        self,
        manifest: Manifest,
        *,
        project_dir: str | os.PathLike[str] | None = None,
        vars: Mapping[str, str] | None = None,
        size: int | None = None,
    ) -> Pool:
        """``POST /v1/pools/warm``: fills the warm pool of a manifest now and returns it once full.

        ``manifest``, ``project_dir`` and ``vars`` are as :meth:`create` takes
        them; a :meth:`run` of the same gets the pool's parked sandboxes.
        ``size`` is how many to park (else the manifest's
        ``[sandbox.pool] size``); it holds until the pool is drained. A pool
        that cannot fill raises (an :class:`AirlockError` saying why).
        """
        return self._run(_ops.warm_pool(manifest, project_dir=project_dir, vars=vars, size=size))

    def drain_pools(self, *, project: str | os.PathLike[str] | None = None, all: bool = False) -> int:
        """``POST /v1/pools/drain``: removes the parked sandboxes of one project's pools (or ``all``) and returns how many.

        It returns once they are gone. A drained pool stays empty until a
        :meth:`warm_pool` or a run of its manifest sizes it again.
        """
        return self._run(_ops.drain_pools(project=project, all=all))

    # Snapshots (docs/snapshots.md): Sandbox.snapshot takes one, create(from_snapshot=…) starts one.

    def snapshots(self) -> builtins.list[SnapshotInfo]:
        """``GET /v1/snapshots``: the daemon's snapshots, by name."""
        return self._run(_snapshots.snapshots())

    def delete_snapshot(self, name: str) -> SnapshotInfo:
        """``DELETE /v1/snapshots/{name}``: removes a snapshot's images (a ConflictError while a sandbox made from it exists)."""
        return self._run(_snapshots.delete_snapshot(name))

    # Plumbing shared with Sandbox: how this client does the steps of an operation (_ops).

    def _run(self, flow: Flow[T]) -> T:
        """Runs an operation with blocking I/O."""
        return _ops.drive(flow, self._perform, _close)

    def _perform(self, op: _ops.Op) -> object:
        if isinstance(op, _ops.Fetch):
            return self._t.send(op.req).read_all()
        if isinstance(op, _ops.Follow):
            return EventStream(self._t.send(op.req), timeout=op.timeout)
        if isinstance(op, _ops.NextEvent):
            assert isinstance(op.stream, EventStream)
            return next(op.stream, None)
        if isinstance(op, _ops.Attach):
            return self._t.attach(op.req)
        if isinstance(op, _ops.NextFrame):
            assert isinstance(op.conn, Upgraded)
            return op.conn.read_frame()
        if isinstance(op, _ops.SendLater):
            conn, data = op.conn, op.data
            assert isinstance(conn, Upgraded)
            send_to = conn

            def send() -> None:
                try:
                    send_to.send(data)
                except OSError:
                    pass  # the command ended without reading it all

            threading.Thread(target=send, name="airlock-stdin", daemon=True).start()
            return None
        if isinstance(op, _ops.Close):
            _close(op.handle)
            return None
        if isinstance(op, _ops.Offload):
            return op.fn()
        raise TypeError(f"not an operation's step: {op!r}")

    def _post_json(self, path: str, body: Any, method: str = "POST") -> Any:
        """A request with a JSON body; its answer's JSON."""
        return self._run(_ops.post_json(path, body, method))

    def _wait(self, sandbox_id: str, *, what: str, done: Callable[[str, str], bool],
              timeout: float | None, gone_ok: bool = False) -> SandboxInfo | None:
        """Follows a sandbox's events until done(kind, state) holds for one (or its record)."""
        return self._run(_ops.wait_until(sandbox_id, what=what, done=done, timeout=timeout, gone_ok=gone_ok))


def _close(handle: object) -> None:
    if isinstance(handle, (EventStream, ExecStream, Upgraded)):
        handle.close()


class Sandbox(FilesMixin):
    """One sandbox: run commands in it, move files, follow its events, stop and delete it.

    Made by :meth:`Client.create` (or :meth:`Client.sandbox` for an existing
    one). As a context manager it deletes the sandbox when the block ends,
    whether the block raised or not.
    """

    def __init__(self, client: Client, info: SandboxInfo | str) -> None:
        self.client: Client = client
        if isinstance(info, SandboxInfo):
            self.id: str = info.id
            self._info: SandboxInfo | None = info
        else:
            self.id = info
            self._info = None

    def __repr__(self) -> str:
        state = self._info.state if self._info else "?"
        return f"<airlock.Sandbox {self.id} ({state})>"

    # The record and the lifecycle.

    @property
    def info(self) -> SandboxInfo:
        """The record as last read (read now if never read); :meth:`refresh` reads it again."""
        if self._info is None:
            return self.refresh()
        return self._info

    @property
    def state(self) -> str:
        """The state now (reads the record)."""
        return self.refresh().state

    def refresh(self) -> SandboxInfo:
        """Reads the record again and returns it."""
        self._info = self.client._run(_ops.get(self.id))
        return self._info

    def wait_ready(self, timeout: float | None = DEFAULT_READY_TIMEOUT) -> SandboxInfo:
        """Waits until the sandbox is ready (event ``sandbox.ready`` or state ``ready``).

        Raises :class:`SandboxFailedError` (with the daemon's reason) when it
        fails, is stopped or deleted first, :class:`WaitTimeoutError` after
        ``timeout`` seconds.
        """
        self._info = self.client._run(_ops.wait_ready(self.id, timeout))
        return self._info

    def stop(self, *, wait: bool = True, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> SandboxInfo:
        """``POST …/stop``: stops the sandbox (its files stay; :meth:`resume` starts it again).

        With ``wait`` returns once it is stopped.
        """
        self._info = self.client._run(_ops.stop(self.id, wait=wait, timeout=timeout))
        return self._info

    def resume(self, *, wait: bool = True, timeout: float | None = DEFAULT_READY_TIMEOUT) -> SandboxInfo:
        """``POST …/resume``: starts a stopped sandbox again; with ``wait`` returns once it is ready."""
        self._info = self.client._run(_ops.resume(self.id, wait=wait, timeout=timeout))
        return self._info

    def delete(self, *, wait: bool = True, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> None:
        """``DELETE /v1/sandboxes/{id}``: removes the sandbox's containers, network and volumes.

        With ``wait`` returns once it is deleted (event ``sandbox.deleted``). A
        sandbox already gone is not an error.
        """
        self._info = self.client._run(_ops.delete(self.id, wait=wait, timeout=timeout)) or self._info

    def set_timeout(self, timeout: Seconds | None, *, on_timeout: str | None = None) -> SandboxInfo:
        """``PATCH /v1/sandboxes/{id}``: the sandbox expires ``timeout`` seconds from now (a number or a timedelta).

        At its deadline it is deleted, or stopped with ``on_timeout="stop"``
        (else the policy it has is kept; a new deadline deletes), after a
        ``sandbox.expired`` event. ``None`` or 0 clears the deadline. Returns
        the record, whose ``expires_at`` is the new deadline.
        """
        self._info = self.client._run(_ops.set_timeout(self.id, timeout, on_timeout=on_timeout))
        return self._info

    def set_idle_timeout(self, idle_timeout: Seconds | None, *, on_idle: str | None = None) -> SandboxInfo:
        """``PATCH /v1/sandboxes/{id}``: the sandbox expires once ready and unused for ``idle_timeout`` seconds.

        No attached client, no exec running, no request using it: then it is
        deleted, or stopped with ``on_idle="stop"``, or paused with
        ``on_idle="pause"`` (until :meth:`unpause`). It replaces the daemon's
        ``runtime.idle_ttl`` for this sandbox; ``None`` or 0 clears it.
        """
        self._info = self.client._run(_ops.set_idle_timeout(self.id, idle_timeout, on_idle=on_idle))
        return self._info

    def snapshot(self, name: str | None = None) -> SnapshotInfo:
        """``POST /v1/sandboxes/{id}/snapshots``: saves the files of its primary and services as a snapshot.

        ``name`` (lowercase letters, digits, ``.``, ``_``, ``-``) or one of the
        daemon's choosing. ``client.create(from_snapshot=snap.name)`` starts a
        sandbox of it; memory is not saved.
        """
        return self.client._run(_snapshots.take_snapshot(self.id, name))

    def fork(self, n: int | None = None, *, ids: Sequence[str] | None = None, wait: bool = True,
             timeout: float | None = DEFAULT_READY_TIMEOUT) -> list[Sandbox]:
        """``POST /v1/sandboxes/{id}/fork``: ``n`` copies of this running sandbox, each its own (ready, with ``wait``).

        A file one copy writes is in no other. The fork's snapshot (``fork-…``)
        stays until :meth:`Client.delete_snapshot` once the copies are deleted.
        ``n`` defaults to one copy, or one for each of ``ids``, the copies' IDs.
        A fork is whole or nothing: when a copy cannot be made (an ID in use:
        :class:`IDAlreadyUsedError`) nothing of it stays.
        """
        return [Sandbox(self.client, i) for i in self.client._run(_snapshots.fork(self.id, n, ids=ids, wait=wait, timeout=timeout))]

    def pause(self) -> SandboxInfo:
        """``POST …/pause``: freezes the sandbox in place, its memory kept; returns the record (state ``paused``).

        Every process of it (its daemons, the commands running in it, its
        services) stops being scheduled until :meth:`unpause`, which lets each
        go on where it was. While paused, :meth:`run` and the other execs raise
        :class:`InvalidStateError`; files can be read, not written; :meth:`stop`
        and :meth:`delete` work. Its lifetime and idle timeout still run. A
        paused sandbox is left as it is. On Kubernetes:
        :class:`NotSupportedError`.
        """
        self._info = self.client._run(_ops.pause(self.id))
        return self._info

    def unpause(self) -> SandboxInfo:
        """``POST …/unpause``: lets a paused sandbox go on where it was; returns the record (state ``ready``).

        (:meth:`resume` is another thing: it starts a stopped sandbox again.)
        """
        self._info = self.client._run(_ops.unpause(self.id))
        return self._info

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.delete()
        except Exception as e:
            if exc is None:
                raise
            log.warning("airlock: cannot delete sandbox %s: %s", self.id, e)

    # Commands.

    def exec_stream(self, cmd: Command, *, stdin: bytes | str | None = None,
                    env: Mapping[str, str] | Sequence[str] | None = None, workdir: str | None = None,
                    id: str | None = None, timeout: float | None = None,
                    kill_grace: float | None = None) -> ExecStream:
        """Runs a command and returns its frames as they come (``POST …/execs``, NDJSON).

        ``cmd`` is a list of arguments, or a string run by ``sh -c``. ``stdin``
        is the command's whole standard input (empty without it); ``env`` adds
        variables (a dict, or ``"NAME=VALUE"`` strings); ``workdir`` is where it
        runs (else the manifest's); ``id`` names the exec. ``timeout`` (seconds)
        ends the command at expiry (SIGTERM, SIGKILL after ``kill_grace``; exit
        code 124). Closing the stream before the end kills the command.
        """
        req = _ops.exec_request(self.id, cmd, stdin=stdin, env=env, workdir=workdir, id=id, timeout=timeout,
                                kill_grace=kill_grace)
        return ExecStream(self.client._t.send(req))

    @overload
    def run(self, cmd: Command, *, stdin: bytes | str | None = ..., env: Mapping[str, str] | Sequence[str] | None = ...,
            workdir: str | None = ..., check: bool = ..., id: str | None = ..., timeout: float | None = ...,
            kill_grace: float | None = ..., on_stdout: OutputCallback | None = ...,
            on_stderr: OutputCallback | None = ..., background: Literal[False] = ...) -> ExecResult: ...

    @overload
    def run(self, cmd: Command, *, stdin: bytes | str | None = ..., env: Mapping[str, str] | Sequence[str] | None = ...,
            workdir: str | None = ..., check: bool = ..., id: str | None = ..., timeout: float | None = ...,
            kill_grace: float | None = ..., on_stdout: OutputCallback | None = ...,
            on_stderr: OutputCallback | None = ..., background: Literal[True]) -> Exec: ...

    def run(self, cmd: Command, *, stdin: bytes | str | None = None,
            env: Mapping[str, str] | Sequence[str] | None = None, workdir: str | None = None,
            check: bool = False, id: str | None = None, timeout: float | None = None,
            kill_grace: float | None = None, on_stdout: OutputCallback | None = None,
            on_stderr: OutputCallback | None = None, background: bool = False) -> ExecResult | Exec:
        """Runs a command to its end and returns its exit code, stdout and stderr.

        The arguments are those of :meth:`exec_stream`. With ``check`` a
        non-zero exit code raises :class:`CommandFailedError`. ``on_stdout``
        and ``on_stderr`` are handed each chunk of output as it comes (the
        result has the whole output all the same). ``timeout`` (seconds) ends
        the command at expiry: SIGTERM to its process group, SIGKILL after
        ``kill_grace`` (5 s by default), exit code 124.

        With ``background`` it returns at once an :class:`Exec`, the exec's
        handle (``wait()``, ``kill()``, ``signal()``, ``output()``): the command
        runs on with no client, its output kept by the daemon; ``stdin`` and
        ``check`` are refused then (:class:`ValueError`).
        """
        if background:
            info = self.client._run(_ops.start_exec(self.id, cmd, stdin=stdin, env=env, workdir=workdir, id=id,
                                                    check=check, timeout=timeout, kill_grace=kill_grace))
            return Exec(self, info, on_stdout=on_stdout, on_stderr=on_stderr)
        with self.exec_stream(cmd, stdin=stdin, env=env, workdir=workdir, id=id, timeout=timeout,
                              kill_grace=kill_grace) as s:
            out = Output()
            for frame in s:
                out.add(frame.stream, frame.data)
                cb = on_stdout if frame.stream == "stdout" else on_stderr if frame.stream == "stderr" else None
                if cb is not None:
                    cb(frame.data)
            res = out.result(s.exit_code, exec_id=s.exec.id if s.exec else "")
        return res.check() if check else res

    def execs(self, *, running: bool = False, limit: int | None = None) -> list[ExecInfo]:
        """``GET …/execs``: the sandbox's exec records, oldest first; with ``running`` those not ended, with ``limit`` the last ones."""
        return self.client._run(_ops.list_execs(self.id, running=running, limit=limit))

    def exec(self, exec_id: str) -> Exec:
        """The handle of one of the sandbox's execs, by its ID (:class:`ExecNotFoundError` when none)."""
        return Exec(self, self.client._run(_ops.get_exec(self.id, exec_id)))

    def pty(self, cmd: Command | None = None, *, cols: int = 80, rows: int = 24,
            env: Mapping[str, str] | Sequence[str] | None = None, workdir: str | None = None, id: str | None = None,
            timeout: float | None = None, kill_grace: float | None = None,
            on_data: DataCallback | None = None) -> Pty:
        """Runs a command on a terminal of its own (``cols`` × ``rows``) and returns it as it starts: a :class:`Pty`.

        Without ``cmd`` it is the sandbox's shell (``sandbox.shell``, else the
        image's ``SHELL``, else ``/bin/sh``). ``env``, ``workdir``, ``id``,
        ``timeout`` and ``kill_grace`` are those of :meth:`run`. ``write()``
        types into it, ``read()`` (or iterating) gives its output, ``resize()``
        and ``signal()`` reach it, ``wait()`` returns its exit code; closing it
        (or the end of a ``with`` block) kills a command still running.
        ``on_data`` is handed each chunk of output as it comes, instead.
        """
        req = pty_request(self.id, cmd, cols=cols, rows=rows, env=env, workdir=workdir, id=id, timeout=timeout,
                          kill_grace=kill_grace)
        return Pty(self, self.client._t.attach(req), exec_id=id or "", on_data=on_data)

    # Files.

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        """Writes ``data`` (text is UTF-8) as the regular file ``path`` (absolute), with ``mode``.

        Missing directories on the way are made; the file is the sandbox user's.
        """
        self.client._run(_ops.write_file(self.id, path, data, mode=mode))

    def read_file(self, path: str) -> bytes:
        """The bytes of the regular file ``path`` (:class:`NotAFileError` for a directory, a link, …)."""
        return self.client._run(_ops.read_file(self.id, path))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The regular file ``path`` as text."""
        return self.read_file(path).decode(encoding)

    def write_archive(self, path: str, archive: bytes | IO[bytes]) -> None:
        """Extracts a tar archive (bytes or a binary file) into the directory ``path``.

        Entry names are relative to ``path``; a file object is streamed.
        """
        self.client._run(_ops.write_archive(self.id, path, archive))

    def read_archive(self, path: str) -> bytes:
        """A tar archive of ``path`` (a directory, or any file): entries are named from its base name."""
        return self.client._run(_ops.read_archive(self.id, path))

    def upload_dir(self, local_dir: str | os.PathLike[str], path: str) -> None:
        """Copies what the local directory holds into the sandbox's directory ``path`` (as ``cp -r DIR/. PATH``)."""
        self.client._run(_ops.upload_dir(self.id, local_dir, path))

    # Events.

    def events(self, *, from_seq: int | None = None, follow: bool = True,
               timeout: float | None = None) -> EventStream:
        """The sandbox's events after ``from_seq`` (all without it), followed live by default.

        See :meth:`Client.events`. Close the stream (or use ``with``) when done.
        """
        return self.client.events(self.id, from_seq=from_seq, follow=follow, timeout=timeout)
