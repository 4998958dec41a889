"""What both clients put on the wire and read from it, in one place.

A request is a :class:`Request` (its method, path, query, headers and body);
:func:`head_fields` gives the header lines every transport sends for it. The
daemon's answers are read by the decoders here: an NDJSON line of events
(:class:`EventCursor`) or of a streamed exec (:class:`ExecCursor`), a frame of
the stream protocol (:func:`encode_frames`, :func:`frame_length`), an exit
frame (:func:`exit_result`). The sync transport (``_transport``) and the
asyncio one (``_aiotransport``) only move these bytes.
"""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import tarfile
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from .errors import EngineError, ProtocolError, WaitTimeoutError
from .models import Event, ExecFrame, ExecInfo, ExecResult

__all__ = ["Request", "Command", "Manifest"]

#: A command: a list of arguments, or one string run by ``sh -c``.
Command = str | Sequence[str]

#: A manifest: the text of a sandbox.toml, the same structure as a dict, or the path of a file.
Manifest = str | Mapping[str, Any] | os.PathLike[str]

#: A request's query: a mapping, or pairs (a name may repeat).
Query = Mapping[str, str | int] | Sequence[tuple[str, str]]

#: The protocol a stream upgrade asks for (docs/api.md "Exec", attached).
STREAM_PROTOCOL = "airlock-stream"

#: Frame types of the stream protocol.
FRAME_STDIN, FRAME_STDOUT, FRAME_STDERR, FRAME_EXIT = 0, 1, 2, 3

#: The largest payload of one frame.
MAX_FRAME = 1 << 20

#: The host name sent to a daemon on a Unix socket or over ssh (any will do).
LOCAL_HOST = "airlockd"

JSON = "application/json"
NDJSON = "application/x-ndjson"


# Requests.


@dataclass(frozen=True)
class Request:
    """One request to the daemon: ``stream`` asks for its body to be read without the client's timeout."""

    method: str
    path: str
    query: Query | None = None
    body: bytes | IO[bytes] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    stream: bool = False

    @property
    def target(self) -> str:
        """The path with its query, as sent on the request line."""
        if not self.query:
            return self.path
        q = list(self.query.items()) if isinstance(self.query, Mapping) else list(self.query)
        # A path in the sandbox that is not UTF-8 is a str with surrogate
        # escapes (os.fsdecode): it goes as its bytes.
        return self.path + "?" + urllib.parse.urlencode(q, encoding="utf-8", errors="surrogateescape")


def json_request(method: str, path: str, body: Any, *, accept: str = "", stream: bool = False) -> Request:
    """A request whose body is ``body`` as JSON."""
    headers = {"Content-Type": JSON}
    if accept:
        headers["Accept"] = accept
    return Request(method, path, body=json.dumps(body).encode("utf-8"), headers=headers, stream=stream)


#: The headers of a request asking to switch to the stream protocol.
UPGRADE_HEADERS = {"Content-Type": JSON, "Connection": "Upgrade", "Upgrade": STREAM_PROTOCOL}


def upgrade_request(path: str, body: Any) -> Request:
    """A POST of a JSON body asking to switch to the stream protocol (101 Switching Protocols)."""
    return Request("POST", path, body=json.dumps(body).encode("utf-8"), headers=UPGRADE_HEADERS, stream=True)


def head_fields(req: Request, host: str, token: str | None) -> list[tuple[str, str]]:
    """The header lines of a request: Host, the token, the request's own, and how its body is framed.

    A body given as a file is sent chunked (:func:`chunk`), its length being unknown.
    """
    hdrs = {"Host": host}
    if token:
        hdrs["Authorization"] = "Bearer " + token
    hdrs.update(req.headers)
    if req.body is None:
        if req.method in ("POST", "PUT", "PATCH"):
            hdrs["Content-Length"] = "0"
    elif isinstance(req.body, (bytes, bytearray, memoryview)):
        hdrs["Content-Length"] = str(len(req.body))
    else:
        hdrs["Transfer-Encoding"] = "chunked"
    return list(hdrs.items())


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (an empty one ends the body)."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


#: How much of a file body is read at a time.
BODY_CHUNK = 1 << 16


def sandbox_path(sandbox_id: str, *rest: str) -> str:
    """``/v1/sandboxes/{id}/…`` with the ID escaped."""
    return "/v1/sandboxes/" + "/".join([urllib.parse.quote(sandbox_id, safe="")] + list(rest))


def argv(cmd: Command) -> list[str]:
    """A command's arguments: a string is run by ``sh -c``."""
    if isinstance(cmd, str):
        return ["sh", "-c", cmd]
    args = [str(a) for a in cmd]
    if not args:
        raise ValueError("an empty command")
    return args


def env_list(env: Mapping[str, str] | Sequence[str] | None) -> list[str] | None:
    """``env`` (a dict, or ``NAME=VALUE`` strings) as the API's list."""
    if env is None:
        return None
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    return [str(e) for e in env]


def as_bytes(data: bytes | str) -> bytes:
    """Text as UTF-8, bytes as they are."""
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def manifest_body(manifest: Manifest, project_dir: str | os.PathLike[str] | None,
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


def tar_of_dir(local_dir: str | os.PathLike[str]) -> io.BytesIO:
    """A tar archive of what a local directory holds (entries named relative to it), read from its start."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(os.listdir(local_dir)):
            tar.add(os.path.join(local_dir, name), arcname=name)
    buf.seek(0)
    return buf


# Answers.


def decode_json(data: bytes) -> Any:
    """An answer's JSON (:class:`ProtocolError` when it is not)."""
    try:
        return json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"the daemon's answer is not JSON: {data[:200]!r}") from e


def unreachable(where: str, e: BaseException) -> str:
    """The message of a connection that could not be made."""
    return f"cannot reach the airlock daemon at {where}: {e}"


def no_answer(where: str, req: Request, e: BaseException) -> str:
    """The message of a request that got no answer."""
    return f"the airlock daemon at {where} did not answer {req.method} {req.target}: {e!r}"


def not_switched(status: int) -> ProtocolError:
    """The error of an upgrade the daemon did not accept."""
    return ProtocolError(f"cannot attach: the daemon answered {status}, not 101 Switching Protocols")


class EventCursor:
    """Where a reader of a sandbox's events is: the last sequence read, and the time left to read.

    :class:`airlock.EventStream` and :class:`airlock.aio.AsyncEventStream`
    read lines; this decodes them.
    """

    def __init__(self, timeout: float | None) -> None:
        self._timeout = timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout
        #: The sequence of the last event read (0 before the first).
        self.last_sequence: int = 0

    def time_left(self) -> float | None:
        """Seconds left to read (None: no bound); raises :class:`WaitTimeoutError` once none are."""
        if self._deadline is None:
            return None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        return left

    def timed_out(self) -> WaitTimeoutError:
        """The error of a read that took longer than the timeout."""
        return WaitTimeoutError(f"no end of the events within {self._timeout} s")

    @staticmethod
    def broken(e: BaseException) -> ProtocolError:
        """The error of a stream that broke."""
        return ProtocolError(f"the event stream broke: {e}")

    def take(self, line: bytes) -> Event | None:
        """The event of one line (None for a blank one)."""
        if not line.strip():
            return None
        try:
            ev = Event.from_json(json.loads(line))
        except (ValueError, TypeError, AttributeError) as e:
            raise ProtocolError(f"an event that is not JSON: {line[:200]!r}") from e
        if ev.sequence:
            self.last_sequence = ev.sequence
        return ev


class ExecCursor:
    """What a reader of a streamed exec saw: the record, the exit code, the output not handed out.

    :class:`airlock.ExecStream` and :class:`airlock.aio.AsyncExecStream`
    read lines; this decodes them.
    """

    def __init__(self) -> None:
        #: The exec's record, once its frame was read.
        self.exec: ExecInfo | None = None
        #: The exit code, once the last frame was read.
        self.exit_code: int | None = None

    @staticmethod
    def broken(e: BaseException) -> ProtocolError:
        """The error of a stream that broke."""
        return ProtocolError(f"the exec's stream broke: {e}")

    def ended(self) -> None:
        """The stream ended: an error unless the exit code came."""
        if self.exit_code is None:
            raise ProtocolError("the exec's stream ended before its exit code")

    def take(self, line: bytes) -> ExecFrame | None:
        """The frame of one line (None for a blank one)."""
        if not line.strip():
            return None
        try:
            frame = ExecFrame.from_json(json.loads(line))
        except (ValueError, TypeError, AttributeError) as e:
            raise ProtocolError(f"an exec frame that is not JSON: {line[:200]!r}") from e
        if frame.exec is not None:
            self.exec = frame.exec
        if frame.exit_code is not None:
            self.exit_code = frame.exit_code
        return frame


class Output:
    """The output of a command gathered from its frames, into an :class:`ExecResult`."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()

    def add(self, stream: str | int | None, data: bytes) -> None:
        """Adds one frame's bytes (a stream name, or a frame type of the stream protocol)."""
        if stream in ("stdout", FRAME_STDOUT):
            self.stdout += data
        elif stream in ("stderr", FRAME_STDERR):
            self.stderr += data

    def result(self, exit_code: int | None, *, exec_id: str = "", sandbox_id: str = "") -> ExecResult:
        """The result (:class:`ProtocolError` without an exit code)."""
        if exit_code is None:
            raise ProtocolError("the exec's stream ended before its exit code")
        return ExecResult(exit_code=exit_code, stdout=bytes(self.stdout), stderr=bytes(self.stderr),
                          exec_id=exec_id, sandbox_id=sandbox_id)


# Frames of the stream protocol.

_HEADER = struct.Struct(">BxxxI")

#: The length of a frame's header.
FRAME_HEADER = _HEADER.size


def encode_frames(typ: int, payload: bytes = b"") -> bytes:
    """One frame of ``typ`` (a payload longer than a frame allows becomes several)."""
    out = bytearray()
    while True:
        piece, payload = payload[:MAX_FRAME], payload[MAX_FRAME:]
        out += _HEADER.pack(typ, len(piece)) + piece
        if not payload:
            return bytes(out)


def frame_length(header: bytes) -> tuple[int, int]:
    """A frame header's type and payload length (:class:`ProtocolError` past :data:`MAX_FRAME`)."""
    typ, n = _HEADER.unpack(header)
    if n > MAX_FRAME:
        raise ProtocolError(f"a frame of {n} bytes, more than {MAX_FRAME}")
    return typ, n


def stdin_frames(stdin: bytes | str) -> bytes:
    """A command's whole standard input as frames, ended by an empty one."""
    raw = as_bytes(stdin)
    return (encode_frames(FRAME_STDIN, raw) if raw else b"") + encode_frames(FRAME_STDIN, b"")


def exit_result(payload: bytes, out: Output, sandbox_id: str) -> ExecResult:
    """The result of a main command from its exit frame's ``{"exit_code": N}`` and its output."""
    try:
        doc = json.loads(payload)
    except ValueError as e:
        raise ProtocolError(f"an exit frame that is not JSON: {payload[:200]!r}") from e
    if not isinstance(doc, dict):
        raise ProtocolError(f"an exit frame that is not an object: {payload[:200]!r}")
    if doc.get("error"):
        raise EngineError(f"sandbox {sandbox_id}: {doc['error']}")
    return out.result(int(doc.get("exit_code", -1)), sandbox_id=sandbox_id)


def stdin_b64(stdin: bytes | str) -> str:
    """Standard input as the exec request's base64 ``stdin``."""
    return base64.b64encode(as_bytes(stdin)).decode("ascii")
