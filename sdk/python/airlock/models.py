"""The records the daemon sends, as dataclasses (control/openapi.json's schemas).

Each keeps the whole JSON object it was read from in ``raw``, so a field a
newer daemon adds is there before this SDK names it. Times are the daemon's
RFC 3339 strings.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DaemonCount", "Port", "SandboxInfo", "Event", "ExecInfo", "ExecFrame", "ExecResult", "Health",
           "Pool", "PooledSandbox", "PoolList"]


def _str(d: dict[str, Any], k: str) -> str:
    v = d.get(k)
    return v if isinstance(v, str) else ""


def _opt_int(d: dict[str, Any], k: str) -> int | None:
    v = d.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class Health:
    """``GET /v1/health``: who the daemon is."""

    pid: int
    build_id: str
    version: str
    log_path: str
    engines: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Health:
        """Reads the daemon's JSON."""
        return cls(pid=int(d.get("pid") or 0), build_id=_str(d, "build_id"), version=_str(d, "version"),
                   log_path=_str(d, "log_path"), engines=list(d.get("engines") or []), raw=d)


@dataclass(frozen=True)
class DaemonCount:
    """How many of a sandbox's daemons are up, of how many."""

    up: int
    total: int


@dataclass(frozen=True)
class Port:
    """A published port: ``host_ip:host_port`` on the host reaches ``container_port/protocol``."""

    host_ip: str
    host_port: int
    container_port: int
    protocol: str


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox's record (``GET /v1/sandboxes/{id}``).

    ``state`` is ``pending``, ``ready``, ``stopped``, ``failed``, ``deleting`` or
    ``deleted``; ``reason`` says why it failed or stopped; ``last_seq`` is the
    sequence of its last event. ``expires_at`` is its deadline ("" for none)
    and ``on_timeout`` what happens then; ``idle_timeout`` (seconds, ``None``
    for none) its own idle timeout and ``on_idle`` what happens then.
    """

    id: str
    state: str
    kind: str
    project: str
    labels: dict[str, str]
    created_at: str
    updated_at: str
    last_seq: int
    daemons: DaemonCount
    reason: str = ""
    container_id: str = ""
    daemon_names: list[str] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)
    expires_at: str = ""
    on_timeout: str = ""
    idle_timeout: float | None = None
    on_idle: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SandboxInfo:
        """Reads the daemon's JSON."""
        dc = d.get("daemons") or {}
        return cls(
            id=_str(d, "id"), state=_str(d, "state"), kind=_str(d, "kind"), project=_str(d, "project"),
            labels=dict(d.get("labels") or {}), created_at=_str(d, "created_at"), updated_at=_str(d, "updated_at"),
            last_seq=int(d.get("last_seq") or 0), daemons=DaemonCount(int(dc.get("up") or 0), int(dc.get("total") or 0)),
            reason=_str(d, "reason"), container_id=_str(d, "container_id"),
            daemon_names=list(d.get("daemon_names") or []),
            ports=[Port(_str(p, "host_ip"), int(p.get("host_port") or 0), int(p.get("container_port") or 0), _str(p, "protocol"))
                   for p in d.get("ports") or []],
            expires_at=_str(d, "expires_at"), on_timeout=_str(d, "on_timeout"),
            idle_timeout=float(d["idle_timeout"]) if isinstance(d.get("idle_timeout"), (int, float)) else None,
            on_idle=_str(d, "on_idle"),
            raw=d,
        )


@dataclass(frozen=True)
class Event:
    """One entry of a sandbox's history (``GET /v1/sandboxes/{id}/events``).

    ``kind`` is e.g. ``sandbox.accepted``, ``sandbox.ready``, ``sandbox.failed``,
    ``sandbox.stopped``, ``sandbox.deleted``, ``daemon.ready``, ``exec.started``,
    ``exec.finished``; ``state`` is the sandbox's state after it. Sequences
    count from 1 without gaps. A ``stream.error`` (sequence 0) is not part of
    the history: it ends a follow that fell behind.
    """

    sandbox_id: str
    sequence: int
    kind: str
    time: str
    state: str
    reason: str = ""
    daemon: str = ""
    service: str = ""
    exec_id: str = ""
    exit_code: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        """Reads the daemon's JSON."""
        return cls(sandbox_id=_str(d, "sandbox_id"), sequence=int(d.get("sequence") or 0), kind=_str(d, "kind"),
                   time=_str(d, "time"), state=_str(d, "state"), reason=_str(d, "reason"), daemon=_str(d, "daemon"),
                   service=_str(d, "service"), exec_id=_str(d, "exec_id"), exit_code=_opt_int(d, "exit_code"), raw=d)


@dataclass(frozen=True)
class ExecInfo:
    """An exec's record (the first frame of a streamed exec)."""

    id: str
    sandbox_id: str
    cmd: list[str]
    started_at: str
    finished_at: str = ""
    exit_code: int | None = None
    #: Its timeout ended it (its exit code is then 124).
    timed_out: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ExecInfo:
        """Reads the daemon's JSON."""
        return cls(id=_str(d, "id"), sandbox_id=_str(d, "sandbox_id"), cmd=list(d.get("cmd") or []),
                   started_at=_str(d, "started_at"), finished_at=_str(d, "finished_at"),
                   exit_code=_opt_int(d, "exit_code"), timed_out=bool(d.get("timed_out")), raw=d)


@dataclass(frozen=True)
class ExecFrame:
    """One frame of a streamed exec, in the order the daemon sends them.

    The first frame carries ``exec`` (the record); then each output frame has
    ``stream`` (``"stdout"`` or ``"stderr"``) and ``data`` (the bytes, decoded
    from ``data`` or ``data_b64`` on the wire); the last has ``exit_code``.
    """

    stream: str | None = None
    data: bytes = b""
    exit_code: int | None = None
    exec: ExecInfo | None = None

    @property
    def text(self) -> str:
        """``data`` as text (UTF-8, undecodable bytes replaced)."""
        return self.data.decode("utf-8", "replace")

    @property
    def is_output(self) -> bool:
        """Whether this is an output frame (stdout or stderr)."""
        return self.stream is not None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ExecFrame:
        """Reads one NDJSON line of the daemon's stream."""
        if "exec" in d and isinstance(d["exec"], dict):
            return cls(exec=ExecInfo.from_json(d["exec"]))
        if "stream" in d:
            if "data_b64" in d:
                data = base64.b64decode(d["data_b64"])
            else:
                data = str(d.get("data") or "").encode("utf-8")
            return cls(stream=str(d["stream"]), data=data)
        if "exit_code" in d:
            return cls(exit_code=int(d["exit_code"]))
        return cls()


@dataclass(frozen=True)
class ExecResult:
    """What a finished command gave: its exit code and whole output.

    ``exec_id`` names the exec (:meth:`Sandbox.run`); ``sandbox_id`` the run
    sandbox whose main command it was (:meth:`Client.run`).
    """

    exit_code: int
    stdout: bytes
    stderr: bytes
    exec_id: str = ""
    sandbox_id: str = ""

    @property
    def stdout_text(self) -> str:
        """stdout as text (UTF-8, undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """stderr as text (UTF-8, undecodable bytes replaced)."""
        return self.stderr.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """Whether the exit code is 0."""
        return self.exit_code == 0

    def check(self) -> ExecResult:
        """Returns self when the exit code is 0, else raises :class:`airlock.CommandFailedError`."""
        if self.exit_code != 0:
            from .errors import CommandFailedError

            tail = self.stderr_text.strip().splitlines()[-3:]
            msg = f"the command exited with code {self.exit_code}"
            if tail:
                msg += ": " + " | ".join(tail)
            raise CommandFailedError(msg, result=self)
        return self


@dataclass(frozen=True)
class PooledSandbox:
    """One sandbox of a warm pool: parked (``ready``) or still being made."""

    id: str
    container: str
    ready: bool
    since: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PooledSandbox:
        """Reads the daemon's JSON."""
        return cls(id=_str(d, "id"), container=_str(d, "container"), ready=bool(d.get("ready")), since=_str(d, "since"), raw=d)


@dataclass(frozen=True)
class Pool:
    """One warm pool of the daemon (``GET /v1/pools``, docs/pool.md): the sandboxes
    of one manifest made, started and parked in advance for its runs.

    ``key`` is the strict key of what its sandboxes are; ``size`` how many it
    keeps, ``ready`` how many are parked and healthy, ``starting`` how many are
    being made. ``hits`` counts the runs that took a parked sandbox, ``misses``
    the others by reason (``empty``, ``stale``, ``unhealthy``, ``disabled``,
    ``options``); ``stale`` the parked sandboxes removed because the key
    changed, ``failures`` those that could not be made or became unhealthy
    (``last_error`` the last).
    """

    key: str
    project: str
    file: str
    engine: str
    size: int
    ready: int
    starting: int
    hits: int
    misses: dict[str, int]
    stale: int
    failures: int
    idle_ttl: str
    last_used: str
    last_error: str = ""
    sandboxes: list[PooledSandbox] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Pool:
        """Reads the daemon's JSON."""
        return cls(key=_str(d, "key"), project=_str(d, "project"), file=_str(d, "file"), engine=_str(d, "engine"),
                   size=int(d.get("size") or 0), ready=int(d.get("ready") or 0), starting=int(d.get("starting") or 0),
                   hits=int(d.get("hits") or 0), misses={str(k): int(v) for k, v in (d.get("misses") or {}).items()},
                   stale=int(d.get("stale") or 0), failures=int(d.get("failures") or 0), idle_ttl=_str(d, "idle_ttl"),
                   last_used=_str(d, "last_used"), last_error=_str(d, "last_error"),
                   sandboxes=[PooledSandbox.from_json(m) for m in d.get("sandboxes") or []], raw=d)


@dataclass(frozen=True)
class PoolList:
    """``GET /v1/pools``: every warm pool of the daemon, and how many sandboxes
    they hold together (``pooled``) against the daemon's ``runtime.pool_max``."""

    pools: list[Pool]
    pooled: int
    pool_max: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PoolList:
        """Reads the daemon's JSON."""
        return cls(pools=[Pool.from_json(p) for p in d.get("pools") or []], pooled=int(d.get("pooled") or 0),
                   pool_max=int(d.get("pool_max") or 0), raw=d)
