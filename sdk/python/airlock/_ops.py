"""The SDK's operations, written once for both clients.

Each operation of the API is a generator (a *flow*): it builds its requests
(``_wire``), yields what it needs done — an :class:`Fetch` of a whole answer,
an event stream to follow, a stream connection to attach — and gets the
result sent back; it decides what the answers mean and returns the value of
the method. :class:`airlock.Client` runs a flow with blocking I/O
(:func:`drive`), :class:`airlock.aio.AsyncClient` with asyncio
(:func:`adrive`): the two clients hold no logic of their own beyond doing
these few steps.

Adding a method to both clients is one flow here and one line in each, as
:func:`set_timeout` is::

    def set_timeout(sandbox_id: str, timeout: Seconds | None, *, on_timeout: str | None) -> Flow[SandboxInfo]:
        body: dict[str, Any] = {"timeout": seconds("timeout", timeout)}
        ...
        return _sandbox_info((yield from post_json(sandbox_path(sandbox_id), body, method="PATCH")))

    # client.py, class Sandbox:
    def set_timeout(self, timeout: Seconds | None, *, on_timeout: str | None = None) -> SandboxInfo:
        self._info = self.client._run(_ops.set_timeout(self.id, timeout, on_timeout=on_timeout))
        return self._info

    # aio.py, class AsyncSandbox: the same, awaited.
    async def set_timeout(self, timeout: Seconds | None, *, on_timeout: str | None = None) -> SandboxInfo:
        self._info = await self.client._run(_ops.set_timeout(self.id, timeout, on_timeout=on_timeout))
        return self._info

A method returning a stream (events, a streamed exec) builds its request here
(:func:`events_request`, :func:`exec_request`) and wraps the answer in each
client's stream class.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import urllib.parse
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, TypeVar, cast

from ._lifetime import Seconds, create_fields, policy, seconds
from ._wire import (
    FRAME_EXIT,
    NDJSON,
    Command,
    Manifest,
    Output,
    Request,
    argv,
    as_bytes,
    decode_json,
    env_list,
    exit_result,
    json_request,
    manifest_body,
    sandbox_path,
    stdin_b64,
    stdin_frames,
    tar_of_dir,
    upgrade_request,
)
from .errors import AirlockError, ProtocolError, SandboxFailedError, SandboxNotFoundError, WaitTimeoutError
from .models import Event, ExecInfo, ExecResult, Health, Pool, PoolList, SandboxInfo

log = logging.getLogger("airlock")

T = TypeVar("T")

#: How long create waits for a sandbox to be ready, by default (an image pull included).
DEFAULT_READY_TIMEOUT = 300.0

#: How long stop and delete wait, by default.
DEFAULT_STOP_TIMEOUT = 120.0


# What a flow asks its client to do. A handle (an event stream, an attached
# connection) is the client's own object; the flow only hands it back.


@dataclass(frozen=True)
class Fetch:
    """Send a request, read its whole answer: the body's bytes (an error status raises its error)."""

    req: Request


@dataclass(frozen=True)
class Follow:
    """Open a sandbox's events (:func:`events_request`) read within ``timeout``: a handle."""

    req: Request
    timeout: float | None


@dataclass(frozen=True)
class NextEvent:
    """The next :class:`Event` of a followed stream, None at its end."""

    stream: object


@dataclass(frozen=True)
class Attach:
    """Switch a request's connection to the stream protocol: a handle."""

    req: Request


@dataclass(frozen=True)
class NextFrame:
    """The next frame (type, payload) of an attached connection, None once the daemon closed it."""

    conn: object


@dataclass(frozen=True)
class SendLater:
    """Send bytes on an attached connection in the background (a command that ended early leaves them unsent)."""

    conn: object
    data: bytes


@dataclass(frozen=True)
class Close:
    """Close a handle now (every handle is closed when its flow ends anyway)."""

    handle: object


@dataclass(frozen=True)
class Offload:
    """Call a blocking function (reading local files) away from the event loop: its result."""

    fn: Callable[[], object]


Op = Fetch | Follow | NextEvent | Attach | NextFrame | SendLater | Close | Offload

#: An operation: yields :data:`Op` s, is sent their results, returns the method's value.
Flow = Generator[Op, Any, T]

#: The ops whose result is a handle to close once the flow ends.
OPENING = (Follow, Attach)


def drive(flow: Flow[T], perform: Callable[[Op], object], close: Callable[[object], None]) -> T:
    """Runs a flow with blocking I/O: ``perform`` does each op; every handle opened is closed at the end.

    An error of an op is raised in the flow, where it may be handled.
    """
    opened: list[object] = []
    value: object = None
    error: BaseException | None = None
    try:
        while True:
            try:
                op = flow.send(value) if error is None else flow.throw(error)
            except StopIteration as stop:
                return cast(T, stop.value)
            try:
                value, error = perform(op), None
                if isinstance(op, OPENING):
                    opened.append(value)
            except BaseException as e:
                value, error = None, e
    finally:
        for h in opened:
            close(h)


async def adrive(flow: Flow[T], perform: Callable[[Op], Awaitable[object]],
                 close: Callable[[object], Awaitable[None]]) -> T:
    """Runs a flow with asyncio, as :func:`drive` does (a cancellation is raised in the flow too)."""
    opened: list[object] = []
    value: object = None
    error: BaseException | None = None
    try:
        while True:
            try:
                op = flow.send(value) if error is None else flow.throw(error)
            except StopIteration as stop:
                return cast(T, stop.value)
            try:
                value, error = await perform(op), None
                if isinstance(op, OPENING):
                    opened.append(value)
            except BaseException as e:
                value, error = None, e
    finally:
        for h in opened:
            await close(h)


# Typed steps.


def fetch(req: Request) -> Flow[bytes]:
    """A request's whole answer."""
    data = yield Fetch(req)
    return cast(bytes, data)


def fetch_json(req: Request, parse: Callable[[Any], T]) -> Flow[T]:
    """A request's answer as JSON, read by ``parse``."""
    data = yield from fetch(req)
    return parse(decode_json(data))


def _sandbox_info(doc: Any) -> SandboxInfo:
    return SandboxInfo.from_json(doc)


def post_json(path: str, body: Any, method: str = "POST") -> Flow[Any]:
    """A request with a JSON body, its answer's JSON."""
    data = yield from fetch(json_request(method, path, body))
    return decode_json(data)


def next_event(stream: object) -> Flow[Event | None]:
    """The next event of a followed stream (None at its end)."""
    ev = yield NextEvent(stream)
    return cast("Event | None", ev)


# The daemon.


def health() -> Flow[Health]:
    """``GET /v1/health``."""
    return (yield from fetch_json(Request("GET", "/v1/health"), Health.from_json))


def metrics() -> Flow[str]:
    """``GET /metrics``: Prometheus' text format."""
    data = yield from fetch(Request("GET", "/metrics", headers={"Accept": "text/plain"}))
    return data.decode("utf-8")


def prune(*, dry_run: bool, all: bool) -> Flow[dict[str, Any]]:
    """``POST /v1/prune``."""
    body: dict[str, Any] = {}
    if dry_run:
        body["dry_run"] = True
    if all:
        body["all"] = True
    doc = yield from post_json("/v1/prune", body)
    return doc if isinstance(doc, dict) else {}


# Sandboxes.


def get(sandbox_id: str) -> Flow[SandboxInfo]:
    """``GET /v1/sandboxes/{id}``."""
    return (yield from fetch_json(Request("GET", sandbox_path(sandbox_id)), _sandbox_info))


def list_sandboxes(labels: Mapping[str, str] | None) -> Flow[list[SandboxInfo]]:
    """``GET /v1/sandboxes?label=…``."""
    q = [("label", f"{k}={v}") for k, v in (labels or {}).items()]
    return (yield from fetch_json(Request("GET", "/v1/sandboxes", query=q),
                                  lambda doc: [SandboxInfo.from_json(d) for d in doc or []]))


def events_request(sandbox_id: str, *, from_seq: int | None, follow: bool) -> Request:
    """``GET /v1/sandboxes/{id}/events`` as NDJSON."""
    q: dict[str, str | int] = {}
    if from_seq is not None:
        q["from"] = from_seq
    if follow:
        q["follow"] = 1
    return Request("GET", sandbox_path(sandbox_id, "events"), query=q, headers={"Accept": NDJSON}, stream=True)


def delete_quietly(sandbox_id: str, what: str) -> Flow[None]:
    """Deletes a sandbox a failed operation leaves, logging (not raising) an error."""
    try:
        yield from fetch(Request("DELETE", sandbox_path(sandbox_id)))
    except AirlockError as e:
        log.warning("airlock: cannot delete %s %s: %s", what, sandbox_id, e)


def create(manifest: Manifest | None, *, project_dir: str | os.PathLike[str] | None, vars: Mapping[str, str] | None,
           id: str | None, labels: Mapping[str, str] | None, env: Mapping[str, str] | Sequence[str] | None,
           no_pool: bool, start: bool, wait: bool, timeout: float | None, keep_on_failure: bool,
           lifetime: Seconds | None, on_timeout: str | None, idle_timeout: Seconds | None,
           on_idle: str | None, from_snapshot: str | None = None) -> Flow[SandboxInfo]:
    """``POST /v1/sandboxes`` (kind ``up``), then, with ``wait``, :func:`wait_ready` (deleting it when that fails).

    ``from_snapshot`` instead of ``manifest`` makes it of a snapshot (:mod:`airlock._snapshots`)."""
    if (manifest is None) == (from_snapshot is None):
        raise TypeError("create: give a manifest or from_snapshot, one of them")
    source = {"from_snapshot": from_snapshot} if manifest is None else manifest_body(manifest, project_dir, vars)
    body: dict[str, Any] = {"kind": "up", "start": start, **source,
                            **create_fields(lifetime, on_timeout, idle_timeout, on_idle)}
    if id is not None:
        body["id"] = id
    if labels:
        body["labels"] = dict(labels)
    if (e := env_list(env)) is not None:
        body["env"] = e
    if no_pool:
        body["no_pool"] = True
    info = _sandbox_info((yield from post_json("/v1/sandboxes", body)))
    if not (wait and start):
        return info
    try:
        return (yield from wait_ready(info.id, timeout))
    except GeneratorExit:
        raise
    except BaseException:
        if not keep_on_failure:
            yield from delete_quietly(info.id, "sandbox that did not get ready:")
        raise


def run(manifest: Manifest, cmd: Command, *, project_dir: str | os.PathLike[str] | None,
        vars: Mapping[str, str] | None, stdin: bytes | str | None, env: Mapping[str, str] | Sequence[str] | None,
        workdir: str | None, id: str | None, labels: Mapping[str, str] | None, no_pool: bool, keep: bool,
        check: bool, timeout: float | None) -> Flow[ExecResult]:
    """A sandbox of kind ``run``: created stopped, attached, resumed, its main command's frames read to the exit frame."""
    body: dict[str, Any] = {"kind": "run", "start": False, "command": argv(cmd), "fast_end": True,
                            **manifest_body(manifest, project_dir, vars)}
    if not keep:
        body["remove_on_exit"] = True
    if stdin is not None:
        body["stdin"] = True
    if (e := env_list(env)) is not None:
        body["env"] = e
    if workdir is not None:
        body["workdir"] = workdir
    if id is not None:
        body["id"] = id
    if labels:
        body["labels"] = dict(labels)
    if no_pool:
        body["no_pool"] = True
    sid = _sandbox_info((yield from post_json("/v1/sandboxes", body))).id
    try:
        yield from wait_created(sid, timeout)
        # Attached before the start: no output is missed.
        conn = yield Attach(upgrade_request(sandbox_path(sid, "attach"), {"stdin": stdin is not None}))
        if stdin is not None:
            yield SendLater(conn, stdin_frames(stdin))
        yield from post_json(sandbox_path(sid, "resume"), {})
        out = Output()
        while True:
            try:
                frame = yield NextFrame(conn)
            except OSError as e:
                raise ProtocolError(f"the main command's stream of sandbox {sid} broke: {e}") from e
            if frame is None:
                cur = yield from get(sid)
                if cur.state == "failed":
                    raise SandboxFailedError(f"sandbox {sid} failed" + (f": {cur.reason}" if cur.reason else ""),
                                             sandbox_id=sid, state=cur.state, sandbox_reason=cur.reason)
                raise ProtocolError(f"the main command's stream of sandbox {sid} ended before its exit code")
            typ, payload = cast("tuple[int, bytes]", frame)
            if typ == FRAME_EXIT:
                break
            out.add(typ, payload)
        yield Close(conn)
        res = exit_result(payload, out, sid)
    except GeneratorExit:
        raise
    except BaseException:
        if not keep:
            yield from delete_quietly(sid, "run sandbox")
        raise
    return res.check() if check else res


def wait_created(sandbox_id: str, timeout: float | None) -> Flow[None]:
    """Waits for a new sandbox's ``sandbox.created`` (:class:`SandboxFailedError` on ``sandbox.failed``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    seq: int | None = None
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise WaitTimeoutError(f"sandbox {sandbox_id} was not created within {timeout} s")
        stream = yield Follow(events_request(sandbox_id, from_seq=seq, follow=True), left)
        try:
            while (ev := (yield from next_event(stream))) is not None:
                if ev.kind == "stream.error":
                    break  # fell behind: follow again
                seq = ev.sequence or seq
                if ev.kind == "sandbox.created":
                    return
                if ev.kind == "sandbox.failed" or ev.state in ("failed", "deleting", "deleted"):
                    raise SandboxFailedError(
                        f"sandbox {sandbox_id} failed before its command ran" + (f": {ev.reason}" if ev.reason else ""),
                        sandbox_id=sandbox_id, state=ev.state, sandbox_reason=ev.reason)
            else:
                raise ProtocolError(f"the daemon ended the events of sandbox {sandbox_id} before it was created")
        except WaitTimeoutError:
            raise WaitTimeoutError(f"sandbox {sandbox_id} was not created within {timeout} s") from None
        yield Close(stream)


def wait_until(sandbox_id: str, *, what: str, done: Callable[[str, str], bool], timeout: float | None,
         failed: Callable[[str, str], bool] | None = None, gone_ok: bool = False) -> Flow[SandboxInfo | None]:
    """Follows a sandbox's events until ``done(kind, state)`` holds for one (or for its record: then the record).

    When ``failed(kind, state)`` holds first, raises :class:`SandboxFailedError`
    with the record's state and reason; after ``timeout`` seconds
    :class:`WaitTimeoutError`. With ``gone_ok`` a sandbox that is no more ends
    the wait (None).
    """
    deadline = None if timeout is None else time.monotonic() + timeout

    def failure(info: SandboxInfo) -> SandboxFailedError:
        word = {"deleting": "deleted"}.get(info.state, info.state)
        return SandboxFailedError(f"sandbox {sandbox_id} {word} before it was {what}" +
                                  (f": {info.reason}" if info.reason else ""),
                                  sandbox_id=sandbox_id, state=info.state, sandbox_reason=info.reason)

    try:
        info = yield from get(sandbox_id)
    except SandboxNotFoundError:
        if gone_ok:
            return None
        raise
    if done("", info.state):
        return info
    if failed is not None and failed("", info.state):
        raise failure(info)
    seq, quiet_ends = info.last_seq, 0
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise WaitTimeoutError(f"sandbox {sandbox_id} was not {what} within {timeout} s")
        try:
            stream = yield Follow(events_request(sandbox_id, from_seq=seq, follow=True), left)
        except SandboxNotFoundError:
            if gone_ok:
                return None
            raise
        got = False
        try:
            while (ev := (yield from next_event(stream))) is not None:
                if ev.kind == "stream.error":
                    break  # fell behind: follow again from seq
                got, seq = True, ev.sequence or seq
                if done(ev.kind, ev.state):
                    return None
                if failed is not None and failed(ev.kind, ev.state):
                    raise failure((yield from get(sandbox_id)))
        except WaitTimeoutError:
            raise WaitTimeoutError(f"sandbox {sandbox_id} was not {what} within {timeout} s") from None
        yield Close(stream)
        quiet_ends = 0 if got else quiet_ends + 1
        if quiet_ends >= 2:
            raise ProtocolError(f"the daemon ended the events of sandbox {sandbox_id} before it was {what}")


def wait_ready(sandbox_id: str, timeout: float | None, *, resumed: bool = False) -> Flow[SandboxInfo]:
    """Waits for ``sandbox.ready`` (or state ``ready``); failed, stopped or deleted first raises. The record then.

    After a resume (``resumed``) the record says ``stopped`` until the start is
    recorded (``sandbox.started`` still carries it): only a ``sandbox.stopped``
    event then means it stopped again.
    """
    def stopped(kind: str, state: str) -> bool:
        return kind == "sandbox.stopped" if resumed else state == "stopped"

    yield from wait_until(sandbox_id, what="ready", timeout=timeout,
                    done=lambda kind, state: kind == "sandbox.ready" or state == "ready",
                    failed=lambda kind, state: kind == "sandbox.failed" or stopped(kind, state) or
                    state in ("failed", "deleting", "deleted"))
    return (yield from get(sandbox_id))


def stop(sandbox_id: str, *, wait: bool, timeout: float | None) -> Flow[SandboxInfo]:
    """``POST …/stop``; with ``wait`` the record once stopped."""
    info = _sandbox_info((yield from post_json(sandbox_path(sandbox_id, "stop"), {})))
    if not wait:
        return info
    yield from wait_until(sandbox_id, what="stopped", timeout=timeout,
                    done=lambda kind, state: kind == "sandbox.stopped" or state == "stopped",
                    failed=lambda kind, state: state in ("failed", "deleting", "deleted"))
    return (yield from get(sandbox_id))


def resume(sandbox_id: str, *, wait: bool, timeout: float | None) -> Flow[SandboxInfo]:
    """``POST …/resume``; with ``wait`` the record once ready."""
    info = _sandbox_info((yield from post_json(sandbox_path(sandbox_id, "resume"), {})))
    if not wait:
        return info
    return (yield from wait_ready(sandbox_id, timeout, resumed=True))


def delete(sandbox_id: str, *, wait: bool, timeout: float | None) -> Flow[SandboxInfo | None]:
    """``DELETE /v1/sandboxes/{id}``; with ``wait`` until ``sandbox.deleted``. None for a sandbox already gone."""
    try:
        info = yield from fetch_json(Request("DELETE", sandbox_path(sandbox_id)), _sandbox_info)
    except SandboxNotFoundError:
        return None
    if wait:
        yield from wait_until(sandbox_id, what="deleted", timeout=timeout, gone_ok=True,
                        done=lambda kind, state: kind == "sandbox.deleted" or state == "deleted")
    return info



def set_timeout(sandbox_id: str, timeout: Seconds | None, *, on_timeout: str | None) -> Flow[SandboxInfo]:
    """``PATCH /v1/sandboxes/{id}`` of the deadline (``timeout`` seconds from now; 0 clears it)."""
    body: dict[str, Any] = {"timeout": seconds("timeout", timeout)}
    if policy("on_timeout", on_timeout) is not None:
        body["on_timeout"] = on_timeout
    return _sandbox_info((yield from post_json(sandbox_path(sandbox_id), body, method="PATCH")))


def set_idle_timeout(sandbox_id: str, idle_timeout: Seconds | None, *, on_idle: str | None) -> Flow[SandboxInfo]:
    """``PATCH /v1/sandboxes/{id}`` of the sandbox's own idle timeout (0 clears it)."""
    body: dict[str, Any] = {"idle_timeout": seconds("idle_timeout", idle_timeout)}
    if policy("on_idle", on_idle) is not None:
        body["on_idle"] = on_idle
    return _sandbox_info((yield from post_json(sandbox_path(sandbox_id), body, method="PATCH")))


def pause(sandbox_id: str) -> Flow[SandboxInfo]:
    """``POST …/pause``: the sandbox frozen in place, its memory kept; the record (state ``paused``)."""
    return _sandbox_info((yield from post_json(sandbox_path(sandbox_id, "pause"), {})))


def unpause(sandbox_id: str) -> Flow[SandboxInfo]:
    """``POST …/unpause``: a paused sandbox let go on where it was; the record (state ``ready``)."""
    return _sandbox_info((yield from post_json(sandbox_path(sandbox_id, "unpause"), {})))


# Commands.


def exec_request(sandbox_id: str, cmd: Command, *, stdin: bytes | str | None,
                 env: Mapping[str, str] | Sequence[str] | None, workdir: str | None, id: str | None,
                 timeout: float | None = None, kill_grace: float | None = None) -> Request:
    """``POST …/execs`` streamed as NDJSON (``timeout`` and ``kill_grace``: :func:`exec_control`)."""
    body: dict[str, Any] = {"cmd": argv(cmd), **exec_control(timeout, kill_grace, False)}
    if id is not None:
        body["id"] = id
    if (e := env_list(env)) is not None:
        body["env"] = e
    if workdir is not None:
        body["workdir"] = workdir
    if stdin is not None:
        body["stdin"] = stdin_b64(stdin)
    return json_request("POST", sandbox_path(sandbox_id, "execs"), body, accept=NDJSON, stream=True)


# Files.


def write_file(sandbox_id: str, path: str, data: bytes | str, *, mode: int) -> Flow[None]:
    """``PUT …/files?path=…&mode=…`` of one regular file."""
    yield from fetch(Request("PUT", sandbox_path(sandbox_id, "files"), query={"path": path, "mode": format(mode, "04o")},
                             body=as_bytes(data), headers={"Content-Type": "application/octet-stream"}))


def read_file(sandbox_id: str, path: str) -> Flow[bytes]:
    """``GET …/files?path=…`` of one regular file."""
    return (yield from fetch(Request("GET", sandbox_path(sandbox_id, "files"), query={"path": path},
                                     headers={"Accept": "application/octet-stream"})))


def write_archive(sandbox_id: str, path: str, archive: bytes | IO[bytes]) -> Flow[None]:
    """``PUT …/files?path=…`` of a tar stream, extracted into the directory ``path``."""
    body = archive if not isinstance(archive, (bytearray, memoryview)) else bytes(archive)
    yield from fetch(Request("PUT", sandbox_path(sandbox_id, "files"), query={"path": path}, body=body,
                             headers={"Content-Type": "application/x-tar"}))


def read_archive(sandbox_id: str, path: str) -> Flow[bytes]:
    """``GET …/files?path=…`` as a tar."""
    return (yield from fetch(Request("GET", sandbox_path(sandbox_id, "files"), query={"path": path},
                                     headers={"Accept": "application/x-tar"})))


def upload_dir(sandbox_id: str, local_dir: str | os.PathLike[str], path: str) -> Flow[None]:
    """What a local directory holds, as a tar, into ``path``."""
    buf = yield Offload(lambda: tar_of_dir(local_dir))
    yield from write_archive(sandbox_id, path, cast(IO[bytes], buf))


# Warm pools.


def pools() -> Flow[PoolList]:
    """``GET /v1/pools``."""
    return (yield from fetch_json(Request("GET", "/v1/pools"), PoolList.from_json))


def warm_pool(manifest: Manifest, *, project_dir: str | os.PathLike[str] | None, vars: Mapping[str, str] | None,
              size: int | None) -> Flow[Pool]:
    """``POST /v1/pools/warm``."""
    body = manifest_body(manifest, project_dir, vars)
    if size is not None:
        body["size"] = size
    return Pool.from_json((yield from post_json("/v1/pools/warm", body)))


def drain_pools(*, project: str | os.PathLike[str] | None, all: bool) -> Flow[int]:
    """``POST /v1/pools/drain``: how many parked sandboxes were removed."""
    if all and project is None:
        body: dict[str, Any] = {"all": True}
    elif project is not None and not all:
        body = {"project": os.fspath(project)}
    else:
        raise ValueError("drain_pools takes a project or all=True (one of them)")
    doc = yield from post_json("/v1/pools/drain", body)
    return int(doc.get("removed") or 0) if isinstance(doc, dict) else 0


# Exec control: timeouts, background execs and their handles (docs/api.md, Exec control).

#: The longest exec timeout or kill grace the daemon takes, in seconds (a year).
MAX_EXEC_SECONDS = 365 * 24 * 3600

#: The output files of a background exec.
OUTPUT_STREAMS = ("stdout", "stderr")


def exec_control(timeout: float | None, kill_grace: float | None, background: bool) -> dict[str, Any]:
    """An exec request's control fields, checked (:class:`ValueError` naming the field; 0 or None: none)."""
    out: dict[str, Any] = {}
    for name, v in (("timeout", timeout), ("kill_grace", kill_grace)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}: a number of seconds, not {type(v).__name__}")
        if math.isnan(v) or v < 0 or v > MAX_EXEC_SECONDS:
            raise ValueError(f"{name}: must be between 0 and {MAX_EXEC_SECONDS} seconds (a year), not {v:g}")
        if v:
            out[name] = float(v)
    if background:
        out["background"] = True
    return out


def exec_path(sandbox_id: str, exec_id: str, *rest: str) -> str:
    """``/v1/sandboxes/{id}/execs/{exec}/…`` with both IDs escaped."""
    return sandbox_path(sandbox_id, "execs", urllib.parse.quote(exec_id, safe=""), *rest)


def start_exec(sandbox_id: str, cmd: Command, *, stdin: bytes | str | None,
               env: Mapping[str, str] | Sequence[str] | None, workdir: str | None, id: str | None, check: bool,
               timeout: float | None, kill_grace: float | None) -> Flow[ExecInfo]:
    """``POST …/execs`` with ``background``: the record, answered (202) as the command starts."""
    if stdin is not None or check:
        raise ValueError("a background exec takes no stdin and no check (check the result of wait())")
    body: dict[str, Any] = {"cmd": argv(cmd), **exec_control(timeout, kill_grace, True)}
    if id is not None:
        body["id"] = id
    if (e := env_list(env)) is not None:
        body["env"] = e
    if workdir is not None:
        body["workdir"] = workdir
    return ExecInfo.from_json((yield from post_json(sandbox_path(sandbox_id, "execs"), body)))


def get_exec(sandbox_id: str, exec_id: str) -> Flow[ExecInfo]:
    """``GET …/execs/{exec}`` (:class:`ExecNotFoundError` when none)."""
    return (yield from fetch_json(Request("GET", exec_path(sandbox_id, exec_id)), ExecInfo.from_json))


def list_execs(sandbox_id: str, *, running: bool, limit: int | None) -> Flow[list[ExecInfo]]:
    """``GET …/execs?running=1&limit=N``, oldest first."""
    q: dict[str, str | int] = {}
    if running:
        q["running"] = 1
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit: a number of execs (1 or more), not {limit!r}")
        q["limit"] = limit
    return (yield from fetch_json(Request("GET", sandbox_path(sandbox_id, "execs"), query=q),
                                  lambda doc: [ExecInfo.from_json(d) for d in doc or []]))


def signal_exec(sandbox_id: str, exec_id: str, signal: str | int) -> Flow[ExecInfo]:
    """``POST …/execs/{exec}/signal`` (a name, ``"TERM"`` or ``"SIGTERM"``, or a number)."""
    if isinstance(signal, bool) or not isinstance(signal, (str, int)):
        raise TypeError(f"signal: a name or a number, not {type(signal).__name__}")
    return ExecInfo.from_json((yield from post_json(exec_path(sandbox_id, exec_id, "signal"),
                                                    {"signal": str(signal)})))


def output_request(sandbox_id: str, exec_id: str, stream: str, *, start: int, follow: bool) -> Request:
    """``GET …/execs/{exec}/output?stream=…&from=…&follow=1`` (with ``follow`` read without the client's timeout)."""
    if stream not in OUTPUT_STREAMS:
        raise ValueError(f"stream: 'stdout' or 'stderr', not {stream!r}")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start: a byte offset (0 or more), not {start!r}")
    q: dict[str, str | int] = {"stream": stream}
    if start:
        q["from"] = start
    if follow:
        q["follow"] = 1
    return Request("GET", exec_path(sandbox_id, exec_id, "output"), query=q,
                   headers={"Accept": "application/octet-stream"}, stream=follow)


def wait_exec(sandbox_id: str, exec_id: str, timeout: float | None) -> Flow[ExecInfo]:
    """Follows the sandbox's events until the exec's ``exec.finished``; its record then, with the exit code.

    :class:`WaitTimeoutError` after ``timeout`` seconds (the exec runs on).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    # The sequence first, then the record: an end after it is in the events followed.
    seq = (yield from get(sandbox_id)).last_seq
    info = yield from get_exec(sandbox_id, exec_id)
    quiet_ends = 0
    while info.exit_code is None:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise WaitTimeoutError(f"exec {exec_id} did not end within {timeout} s")
        stream = yield Follow(events_request(sandbox_id, from_seq=seq, follow=True), left)
        got = False
        try:
            while (ev := (yield from next_event(stream))) is not None:
                if ev.kind == "stream.error":
                    break  # fell behind: follow again from seq
                got, seq = True, ev.sequence or seq
                if ev.kind == "exec.finished" and ev.exec_id == exec_id:
                    info = yield from get_exec(sandbox_id, exec_id)
                    if info.exit_code is None and ev.exit_code is not None:
                        info = dataclasses.replace(info, exit_code=ev.exit_code)
                    return info
        except WaitTimeoutError:
            raise WaitTimeoutError(f"exec {exec_id} did not end within {timeout} s") from None
        yield Close(stream)
        info = yield from get_exec(sandbox_id, exec_id)
        quiet_ends = 0 if got else quiet_ends + 1
        if info.exit_code is None and quiet_ends >= 2:
            raise ProtocolError(f"the daemon ended the events of sandbox {sandbox_id} before exec {exec_id} ended")
    return info


def exec_result(sandbox_id: str, info: ExecInfo) -> Flow[ExecResult]:
    """An ended background exec's exit code and whole output (both files read)."""
    if info.exit_code is None:
        raise ProtocolError(f"exec {info.id} has no exit code after its end")
    out = yield from fetch(output_request(sandbox_id, info.id, "stdout", start=0, follow=False))
    err = yield from fetch(output_request(sandbox_id, info.id, "stderr", start=0, follow=False))
    return ExecResult(exit_code=info.exit_code, stdout=out, stderr=err, exec_id=info.id)
