"""The client of the airlock control daemon, and the handle of one sandbox."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import logging
import os
import ssl
import tarfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Literal, overload

from ._transport import FRAME_EXIT, FRAME_STDERR, FRAME_STDIN, FRAME_STDOUT, Response, Transport, default_socket, parse_host
from .errors import (
    AirlockError,
    EngineError,
    ProtocolError,
    SandboxFailedError,
    SandboxNotFoundError,
    WaitTimeoutError,
)
from ._execs import Exec, OutputCallback, control_fields
from ._lifetime import LifetimeMixin, Seconds, create_fields
from .models import Event, ExecFrame, ExecInfo, ExecResult, Health, Pool, PoolList, SandboxInfo

__all__ = ["Client", "Sandbox", "EventStream", "ExecStream", "Command", "Manifest"]

log = logging.getLogger("airlock")

#: A command: a list of arguments, or one string run by ``sh -c``.
Command = str | Sequence[str]

#: A manifest: the text of a sandbox.toml, the same structure as a dict, or the path of a file.
Manifest = str | Mapping[str, Any] | os.PathLike[str]

#: How long create waits for a sandbox to be ready, by default (an image pull included).
DEFAULT_READY_TIMEOUT = 300.0

#: How long stop and delete wait, by default.
DEFAULT_STOP_TIMEOUT = 120.0


def _sandbox_path(sandbox_id: str, *rest: str) -> str:
    return "/v1/sandboxes/" + "/".join([urllib.parse.quote(sandbox_id, safe="")] + list(rest))


def _decode_json(resp: Response) -> Any:
    data = resp.read_all()
    try:
        return json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"the daemon's answer is not JSON: {data[:200]!r}") from e


def _argv(cmd: Command) -> list[str]:
    if isinstance(cmd, str):
        return ["sh", "-c", cmd]
    argv = [str(a) for a in cmd]
    if not argv:
        raise ValueError("an empty command")
    return argv


def _env_list(env: Mapping[str, str] | Sequence[str] | None) -> list[str] | None:
    if env is None:
        return None
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    return [str(e) for e in env]


def _manifest_body(manifest: Manifest, project_dir: str | os.PathLike[str] | None,
                   vars: Mapping[str, str] | None) -> dict[str, Any]:
    """The fields of a request that give a manifest as text: manifest_toml or manifest_doc, project_dir, vars."""
    body: dict[str, Any] = {}
    if isinstance(manifest, str):
        body["manifest_toml"] = manifest
    elif isinstance(manifest, Mapping):
        body["manifest_doc"] = dict(manifest)
    elif isinstance(manifest, os.PathLike):
        with open(manifest, encoding="utf-8") as f:
            body["manifest_toml"] = f.read()
    else:
        raise TypeError(f"a manifest is TOML text, a dict or a path, not {type(manifest).__name__}")
    if project_dir is not None:
        body["project_dir"] = os.fspath(project_dir)
    if vars:
        body["vars"] = dict(vars)
    return body


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
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._timeout = timeout
        #: The sequence of the last event read (0 before the first).
        self.last_sequence: int = 0

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        while True:
            if self._resp is None:
                raise StopIteration
            if self._deadline is not None:
                left = self._deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise WaitTimeoutError(f"no end of the events within {self._timeout} s")
                self._resp.set_timeout(left)
            try:
                line = self._resp.readline()
            except TimeoutError as e:
                self.close()
                raise WaitTimeoutError(f"no end of the events within {self._timeout} s") from e
            except OSError as e:
                self.close()
                raise ProtocolError(f"the event stream broke: {e}") from e
            if not line:
                self.close()
                raise StopIteration
            if not line.strip():
                continue
            try:
                ev = Event.from_json(json.loads(line))
            except ValueError as e:
                self.close()
                raise ProtocolError(f"an event that is not JSON: {line[:200]!r}") from e
            if ev.sequence:
                self.last_sequence = ev.sequence
            return ev

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
        #: The exec's record, once its frame was read.
        self.exec: ExecInfo | None = None
        #: The exit code, once the last frame was read.
        self.exit_code: int | None = None

    def __iter__(self) -> Iterator[ExecFrame]:
        return self

    def __next__(self) -> ExecFrame:
        while True:
            if self._resp is None:
                raise StopIteration
            try:
                line = self._resp.readline()
            except OSError as e:
                self.close()
                raise ProtocolError(f"the exec's stream broke: {e}") from e
            if not line:
                self.close()
                if self.exit_code is None:
                    raise ProtocolError("the exec's stream ended before its exit code")
                raise StopIteration
            if not line.strip():
                continue
            try:
                frame = ExecFrame.from_json(json.loads(line))
            except (ValueError, TypeError) as e:
                self.close()
                raise ProtocolError(f"an exec frame that is not JSON: {line[:200]!r}") from e
            if frame.exec is not None:
                self.exec = frame.exec
            if frame.exit_code is not None:
                self.exit_code = frame.exit_code
                self.close()
            return frame

    def result(self) -> ExecResult:
        """Reads the frames left and returns the exit code with stdout and stderr (of the frames not yet read)."""
        out, err = bytearray(), bytearray()
        for frame in self:
            if frame.stream == "stdout":
                out += frame.data
            elif frame.stream == "stderr":
                err += frame.data
        if self.exit_code is None:
            raise ProtocolError("the exec's stream ended before its exit code")
        return ExecResult(exit_code=self.exit_code, stdout=bytes(out), stderr=bytes(err),
                          exec_id=self.exec.id if self.exec else "")

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
        default = not (host or os.environ.get("AIRLOCK_HOST"))
        host = host or os.environ.get("AIRLOCK_HOST") or default_socket()
        env: Mapping[str, str] = os.environ
        if tls_ca:
            env = {**os.environ, "AIRLOCK_TLS_CA": tls_ca}
        endpoint = parse_host(host, env)
        if endpoint.scheme == "tcp":
            if token is None:
                token = os.environ.get("AIRLOCK_TOKEN") or None
            if tls_context is not None and not endpoint.tls:
                if not host.lower().startswith("tcp://"):
                    raise ValueError(f"{host!r}: plain HTTP, yet a tls_context was given (use https:// or tcp://)")
                endpoint = dataclasses.replace(endpoint, tls=True)
            if endpoint.tls and tls_context is None:
                tls_context = ssl.create_default_context(cafile=endpoint.ca or None)
        else:
            tls_context = None
        self._t = Transport(endpoint, token=token, timeout=timeout, tls_context=tls_context,
                            ssh_command=tuple(ssh_command), ssh_options=tuple(ssh_options),
                            remote_command=tuple(remote_command), check_runtime_dir=default)

    @property
    def address(self) -> str:
        """The daemon's address (a socket path, ``http://…``, ``ssh://…``)."""
        return self._t.describe()

    def __repr__(self) -> str:
        return f"airlock.Client({self.address!r})"

    # The daemon.

    def health(self) -> Health:
        """``GET /v1/health``: the daemon's pid, build, version, log and Engines."""
        return Health.from_json(_decode_json(self._t.request("GET", "/v1/health")))

    # Sandboxes.

    def create(
        self,
        manifest: Manifest,
        *,
        project_dir: str | os.PathLike[str] | None = None,
        vars: Mapping[str, str] | None = None,
        id: str | None = None,
        labels: Mapping[str, str] | None = None,
        start: bool = True,
        wait: bool = True,
        timeout: float | None = DEFAULT_READY_TIMEOUT,
        keep_on_failure: bool = False,
        lifetime: Seconds | None = None,
        on_timeout: str | None = None,
        idle_timeout: Seconds | None = None,
        on_idle: str | None = None,
    ) -> Sandbox:
        """Creates a sandbox from a manifest and, by default, waits until it is ready.

        ``manifest`` is the text of a sandbox.toml (sent as ``manifest_toml``), a
        dict of the same structure (sent as ``manifest_doc``), or the path of a
        sandbox.toml (its text is sent). ``project_dir`` is a directory on the
        daemon's host; without it the daemon makes an empty one, removed with the
        sandbox. ``vars`` give the values of ``${NAME}`` in the manifest. ``id``
        is the sandbox's ID (else the daemon makes one); ``labels`` are kept on
        its record (``list(labels=…)`` filters on them).

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
        ``on_idle="stop"``) once ready and unused that long, instead of the
        daemon's ``runtime.idle_ttl``. :meth:`Sandbox.set_timeout` and
        :meth:`Sandbox.set_idle_timeout` change them later.
        """
        body: dict[str, Any] = {"kind": "up", "start": start, **_manifest_body(manifest, project_dir, vars),
                                **create_fields(lifetime, on_timeout, idle_timeout, on_idle)}
        if id is not None:
            body["id"] = id
        if labels:
            body["labels"] = dict(labels)
        info = SandboxInfo.from_json(self._post_json("/v1/sandboxes", body))
        sb = Sandbox(self, info)
        if wait and start:
            try:
                sb.wait_ready(timeout=timeout)
            except BaseException:
                if not keep_on_failure:
                    try:
                        self._t.request("DELETE", _sandbox_path(info.id)).close()
                    except AirlockError as e:
                        log.warning("airlock: cannot delete sandbox %s that did not get ready: %s", info.id, e)
                raise
        return sb

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
        body: dict[str, Any] = {"kind": "run", "start": False, "command": _argv(cmd), "fast_end": True,
                                **_manifest_body(manifest, project_dir, vars)}
        if not keep:
            body["remove_on_exit"] = True
        if stdin is not None:
            body["stdin"] = True
        if (e := _env_list(env)) is not None:
            body["env"] = e
        if workdir is not None:
            body["workdir"] = workdir
        if id is not None:
            body["id"] = id
        if labels:
            body["labels"] = dict(labels)
        if no_pool:
            body["no_pool"] = True
        info = SandboxInfo.from_json(self._post_json("/v1/sandboxes", body))
        sid, ended = info.id, False
        try:
            self._wait_created(sid, timeout)
            # Attached before the start: no output is missed.
            stream = self._t.upgrade(_sandbox_path(sid, "attach"), json.dumps({"stdin": stdin is not None}).encode("utf-8"))
            with stream:
                if stdin is not None:
                    raw = stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin)

                    def send() -> None:
                        try:
                            if raw:
                                stream.send_frame(FRAME_STDIN, raw)
                            stream.send_frame(FRAME_STDIN, b"")
                        except OSError:
                            pass  # the command ended without reading it all

                    threading.Thread(target=send, name=f"airlock-stdin-{sid}", daemon=True).start()
                self._post_json(_sandbox_path(sid, "resume"), {})
                out, err, exit_payload = bytearray(), bytearray(), b""
                while True:
                    try:
                        frame = stream.read_frame()
                    except OSError as e:
                        raise ProtocolError(f"the main command's stream of sandbox {sid} broke: {e}") from e
                    if frame is None:
                        cur = self.get(sid)
                        if cur.state == "failed":
                            raise SandboxFailedError(
                                f"sandbox {sid} failed" + (f": {cur.reason}" if cur.reason else ""),
                                sandbox_id=sid, state=cur.state, sandbox_reason=cur.reason)
                        raise ProtocolError(f"the main command's stream of sandbox {sid} ended before its exit code")
                    typ, payload = frame
                    if typ == FRAME_STDOUT:
                        out += payload
                    elif typ == FRAME_STDERR:
                        err += payload
                    elif typ == FRAME_EXIT:
                        exit_payload = payload
                        break
            try:
                exit_doc = json.loads(exit_payload)
            except ValueError as e:
                raise ProtocolError(f"an exit frame that is not JSON: {exit_payload[:200]!r}") from e
            if exit_doc.get("error"):
                raise EngineError(f"sandbox {sid}: {exit_doc['error']}")
            ended = True
            res = ExecResult(exit_code=int(exit_doc.get("exit_code", -1)), stdout=bytes(out), stderr=bytes(err),
                             sandbox_id=sid)
        finally:
            if not ended and not keep:
                try:
                    self._t.request("DELETE", _sandbox_path(sid)).close()
                except AirlockError as e:
                    log.warning("airlock: cannot delete run sandbox %s: %s", sid, e)
        return res.check() if check else res

    def _wait_created(self, sandbox_id: str, timeout: float | None) -> None:
        """Waits for a new sandbox's ``sandbox.created`` (:class:`SandboxFailedError` on ``sandbox.failed``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seq: int | None = None
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeoutError(f"sandbox {sandbox_id} was not created within {timeout} s")
            with self.events(sandbox_id, from_seq=seq, follow=True, timeout=left) as stream:
                try:
                    for ev in stream:
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

    def sandbox(self, sandbox_id: str) -> Sandbox:
        """A handle of an existing sandbox (its record is read on first use)."""
        return Sandbox(self, sandbox_id)

    def get(self, sandbox_id: str) -> SandboxInfo:
        """``GET /v1/sandboxes/{id}``: a sandbox's record (:class:`SandboxNotFoundError` when none)."""
        return SandboxInfo.from_json(_decode_json(self._t.request("GET", _sandbox_path(sandbox_id))))

    def list(self, labels: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """``GET /v1/sandboxes``: the sandboxes carrying every label given, deleted ones left out."""
        q = [("label", f"{k}={v}") for k, v in (labels or {}).items()]
        doc = _decode_json(self._t.request("GET", "/v1/sandboxes", query=q))
        return [SandboxInfo.from_json(d) for d in doc or []]

    def events(self, sandbox_id: str, *, from_seq: int | None = None, follow: bool = False,
               timeout: float | None = None) -> EventStream:
        """``GET /v1/sandboxes/{id}/events``: the events after sequence ``from_seq`` (all without it).

        With ``follow`` the stream then carries live events until closed.
        ``timeout`` bounds the whole read (:class:`WaitTimeoutError`).
        """
        q: dict[str, str | int] = {}
        if from_seq is not None:
            q["from"] = from_seq
        if follow:
            q["follow"] = 1
        resp = self._t.request("GET", _sandbox_path(sandbox_id, "events"), query=q,
                               headers={"Accept": "application/x-ndjson"}, stream=True)
        return EventStream(resp, timeout=timeout)

    def prune(self, *, dry_run: bool = False, all: bool = False) -> dict[str, Any]:
        """``POST /v1/prune``: removes (or, with ``dry_run``, lists) what ``airlock prune`` would."""
        body: dict[str, Any] = {}
        if dry_run:
            body["dry_run"] = True
        if all:
            body["all"] = True
        doc = self._post_json("/v1/prune", body)
        return doc if isinstance(doc, dict) else {}

    # Warm pools.

    def pools(self) -> PoolList:
        """``GET /v1/pools``: the daemon's warm pools (docs/pool.md), their parked sandboxes, hits and misses."""
        return PoolList.from_json(_decode_json(self._t.request("GET", "/v1/pools")))

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
        body = _manifest_body(manifest, project_dir, vars)
        if size is not None:
            body["size"] = size
        return Pool.from_json(self._post_json("/v1/pools/warm", body))

    def drain_pools(self, *, project: str | os.PathLike[str] | None = None, all: bool = False) -> int:
        """``POST /v1/pools/drain``: removes the parked sandboxes of one project's pools (or ``all``) and returns how many.

        It returns once they are gone. A drained pool stays empty until a
        :meth:`warm_pool` or a run of its manifest sizes it again.
        """
        if all and project is None:
            body: dict[str, Any] = {"all": True}
        elif project is not None and not all:
            body = {"project": os.fspath(project)}
        else:
            raise ValueError("drain_pools takes a project or all=True (one of them)")
        doc = self._post_json("/v1/pools/drain", body)
        return int(doc.get("removed") or 0) if isinstance(doc, dict) else 0

    # Plumbing shared with Sandbox.

    def _post_json(self, path: str, body: Any, method: str = "POST") -> Any:
        data = json.dumps(body).encode("utf-8")
        return _decode_json(self._t.request(method, path, body=data, headers={"Content-Type": "application/json"}))

    def _wait(self, sandbox_id: str, *, what: str, done: Callable[[str, str], bool],
              timeout: float | None, gone_ok: bool = False) -> SandboxInfo | None:
        """Follows a sandbox's events until done(kind, state) holds for one (or its record)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            info = self.get(sandbox_id)
        except SandboxNotFoundError:
            if gone_ok:
                return None
            raise
        if done("", info.state):
            return info
        seq, quiet_ends = info.last_seq, 0
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeoutError(f"sandbox {sandbox_id} was not {what} within {timeout} s")
            try:
                stream = self.events(sandbox_id, from_seq=seq, follow=True, timeout=left)
            except SandboxNotFoundError:
                if gone_ok:
                    return None
                raise
            got = False
            with stream:
                try:
                    for ev in stream:
                        if ev.kind == "stream.error":
                            break  # fell behind: follow again from seq
                        got, seq = True, ev.sequence or seq
                        if done(ev.kind, ev.state):
                            return None
                except WaitTimeoutError:
                    raise WaitTimeoutError(f"sandbox {sandbox_id} was not {what} within {timeout} s") from None
            quiet_ends = 0 if got else quiet_ends + 1
            if quiet_ends >= 2:
                raise ProtocolError(f"the daemon ended the events of sandbox {sandbox_id} before it was {what}")


class Sandbox(LifetimeMixin):
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
        self._info = self.client.get(self.id)
        return self._info

    def wait_ready(self, timeout: float | None = DEFAULT_READY_TIMEOUT) -> SandboxInfo:
        """Waits until the sandbox is ready (event ``sandbox.ready`` or state ``ready``).

        Raises :class:`SandboxFailedError` (with the daemon's reason) when it
        fails, is stopped or deleted first, :class:`WaitTimeoutError` after
        ``timeout`` seconds.
        """

        def done(kind: str, state: str) -> bool:
            if kind == "sandbox.ready" or state == "ready":
                return True
            if kind == "sandbox.failed" or state in ("failed", "stopped", "deleting", "deleted"):
                info = self.client.get(self.id)
                word = {"failed": "failed", "stopped": "stopped", "deleting": "deleted", "deleted": "deleted"}.get(info.state, info.state)
                raise SandboxFailedError(
                    f"sandbox {self.id} {word} before it was ready" + (f": {info.reason}" if info.reason else ""),
                    sandbox_id=self.id, state=info.state, sandbox_reason=info.reason)
            return False

        self.client._wait(self.id, what="ready", done=done, timeout=timeout)
        return self.refresh()

    def stop(self, *, wait: bool = True, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> SandboxInfo:
        """``POST …/stop``: stops the sandbox (its files stay; :meth:`resume` starts it again).

        With ``wait`` returns once it is stopped.
        """
        self._info = SandboxInfo.from_json(self.client._post_json(_sandbox_path(self.id, "stop"), {}))
        if wait:

            def done(kind: str, state: str) -> bool:
                if kind == "sandbox.stopped" or state == "stopped":
                    return True
                if state in ("failed", "deleting", "deleted"):
                    raise SandboxFailedError(f"sandbox {self.id} is {state}, not stopped", sandbox_id=self.id, state=state)
                return False

            self.client._wait(self.id, what="stopped", done=done, timeout=timeout)
            return self.refresh()
        return self._info

    def resume(self, *, wait: bool = True, timeout: float | None = DEFAULT_READY_TIMEOUT) -> SandboxInfo:
        """``POST …/resume``: starts a stopped sandbox again; with ``wait`` returns once it is ready."""
        self._info = SandboxInfo.from_json(self.client._post_json(_sandbox_path(self.id, "resume"), {}))
        if wait:
            return self.wait_ready(timeout=timeout)
        return self._info

    def delete(self, *, wait: bool = True, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> None:
        """``DELETE /v1/sandboxes/{id}``: removes the sandbox's containers, network and volumes.

        With ``wait`` returns once it is deleted (event ``sandbox.deleted``). A
        sandbox already gone is not an error.
        """
        try:
            self._info = SandboxInfo.from_json(_decode_json(self.client._t.request("DELETE", _sandbox_path(self.id))))
        except SandboxNotFoundError:
            return
        if wait:
            self.client._wait(self.id, what="deleted", timeout=timeout, gone_ok=True,
                              done=lambda kind, state: kind == "sandbox.deleted" or state == "deleted")

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
        body: dict[str, Any] = {"cmd": _argv(cmd), **control_fields(timeout, kill_grace, False)}
        if id is not None:
            body["id"] = id
        if (e := _env_list(env)) is not None:
            body["env"] = e
        if workdir is not None:
            body["workdir"] = workdir
        if stdin is not None:
            raw = stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin)
            body["stdin"] = base64.b64encode(raw).decode("ascii")
        resp = self.client._t.request(
            "POST", _sandbox_path(self.id, "execs"), body=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json", "Accept": "application/x-ndjson"}, stream=True)
        return ExecStream(resp)

    @overload
    def run(self, cmd: Command, *, stdin: bytes | str | None = ..., env: Mapping[str, str] | Sequence[str] | None = ...,
            workdir: str | None = ..., check: bool = ..., id: str | None = ..., timeout: float | None = ...,
            kill_grace: float | None = ..., on_stdout: OutputCallback | None = ..., on_stderr: OutputCallback | None = ...,
            background: Literal[False] = ...) -> ExecResult: ...

    @overload
    def run(self, cmd: Command, *, stdin: bytes | str | None = ..., env: Mapping[str, str] | Sequence[str] | None = ...,
            workdir: str | None = ..., check: bool = ..., id: str | None = ..., timeout: float | None = ...,
            kill_grace: float | None = ..., on_stdout: OutputCallback | None = ..., on_stderr: OutputCallback | None = ...,
            background: Literal[True]) -> Exec: ...

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
        ``check`` are refused then.
        """
        if background:
            if stdin is not None or check:
                raise ValueError("a background exec takes no stdin and no check (check the result of wait())")
            body: dict[str, Any] = {"cmd": _argv(cmd), **control_fields(timeout, kill_grace, True)}
            if id is not None:
                body["id"] = id
            if (e := _env_list(env)) is not None:
                body["env"] = e
            if workdir is not None:
                body["workdir"] = workdir
            info = ExecInfo.from_json(self.client._post_json(_sandbox_path(self.id, "execs"), body))
            return Exec(self, info, on_stdout=on_stdout, on_stderr=on_stderr)
        with self.exec_stream(cmd, stdin=stdin, env=env, workdir=workdir, id=id, timeout=timeout, kill_grace=kill_grace) as s:
            if on_stdout is None and on_stderr is None:
                res = s.result()
            else:
                out, err = bytearray(), bytearray()
                for frame in s:
                    if frame.stream == "stdout":
                        out += frame.data
                        if on_stdout is not None:
                            on_stdout(frame.data)
                    elif frame.stream == "stderr":
                        err += frame.data
                        if on_stderr is not None:
                            on_stderr(frame.data)
                if s.exit_code is None:
                    raise ProtocolError("the exec's stream ended before its exit code")
                res = ExecResult(exit_code=s.exit_code, stdout=bytes(out), stderr=bytes(err),
                                 exec_id=s.exec.id if s.exec else "")
        return res.check() if check else res

    def execs(self, *, running: bool = False, limit: int | None = None) -> list[ExecInfo]:
        """The sandbox's exec records, oldest first (``GET …/execs``): with ``running`` only those not ended, with ``limit`` the last ones."""
        q: dict[str, str | int] = {}
        if running:
            q["running"] = 1
        if limit is not None:
            q["limit"] = limit
        doc = _decode_json(self.client._t.request("GET", _sandbox_path(self.id, "execs"), query=q))
        return [ExecInfo.from_json(d) for d in doc or []]

    def exec(self, exec_id: str) -> Exec:
        """The handle of one of the sandbox's execs, by its ID."""
        doc = _decode_json(self.client._t.request("GET", _sandbox_path(self.id, "execs", exec_id)))
        return Exec(self, ExecInfo.from_json(doc))

    # Files.

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        """Writes ``data`` (text is UTF-8) as the regular file ``path`` (absolute), with ``mode``.

        Missing directories on the way are made; the file is the sandbox user's.
        """
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        self.client._t.request("PUT", _sandbox_path(self.id, "files"), query={"path": path, "mode": format(mode, "04o")},
                               body=raw, headers={"Content-Type": "application/octet-stream"}).close()

    def read_file(self, path: str) -> bytes:
        """The bytes of the regular file ``path`` (:class:`NotAFileError` for a directory, a link, …)."""
        return self.client._t.request("GET", _sandbox_path(self.id, "files"), query={"path": path},
                                      headers={"Accept": "application/octet-stream"}).read_all()

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The regular file ``path`` as text."""
        return self.read_file(path).decode(encoding)

    def write_archive(self, path: str, archive: bytes | IO[bytes]) -> None:
        """Extracts a tar archive (bytes or a binary file) into the directory ``path``.

        Entry names are relative to ``path``; a file object is streamed.
        """
        body = archive if not isinstance(archive, (bytearray, memoryview)) else bytes(archive)
        self.client._t.request("PUT", _sandbox_path(self.id, "files"), query={"path": path}, body=body,
                               headers={"Content-Type": "application/x-tar"}).close()

    def read_archive(self, path: str) -> bytes:
        """A tar archive of ``path`` (a directory, or any file): entries are named from its base name."""
        return self.client._t.request("GET", _sandbox_path(self.id, "files"), query={"path": path},
                                      headers={"Accept": "application/x-tar"}).read_all()

    def upload_dir(self, local_dir: str | os.PathLike[str], path: str) -> None:
        """Copies what the local directory holds into the sandbox's directory ``path`` (as ``cp -r DIR/. PATH``)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name in sorted(os.listdir(local_dir)):
                tar.add(os.path.join(local_dir, name), arcname=name)
        buf.seek(0)
        self.write_archive(path, buf)

    # Events.

    def events(self, *, from_seq: int | None = None, follow: bool = True,
               timeout: float | None = None) -> EventStream:
        """The sandbox's events after ``from_seq`` (all without it), followed live by default.

        See :meth:`Client.events`. Close the stream (or use ``with``) when done.
        """
        return self.client.events(self.id, from_seq=from_seq, follow=follow, timeout=timeout)
