"""How the sync client reaches the daemon: HTTP/1.1 over a Unix socket, TCP (optionally TLS), or ssh.

Which daemon and how (:class:`Target`: the address, the token, TLS, ssh's
command line) is shared with the asyncio client's transport (``_aiotransport``).
Every request opens a connection of its own and closes it once its answer was
read: a Unix socket costs nothing to open, and a stream (events, a streamed
exec) holds its connection for as long as it is read anyway. Over ssh a
connection is a stream of the client's one ``ssh … airlock daemon dial-stdio
--mux`` (:mod:`airlock._mux`), which costs nothing to open either.
"""

from __future__ import annotations

import dataclasses
import http.client
import io
import ipaddress
import os
import socket
import ssl
import stat
import sys
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

from ._wire import (BODY_CHUNK, FRAME_EXIT, FRAME_HEADER, FRAME_STDERR, FRAME_STDIN, FRAME_STDOUT, LOCAL_HOST, MAX_FRAME,
                    STREAM_PROTOCOL, UPGRADE_HEADERS, Request, chunk, encode_frames, frame_length, head_fields,
                    no_answer, not_switched, unreachable)
from ._mux import SyncMux
from .errors import DaemonUnreachableError, ProtocolError, UnsafeRuntimeDirError, error_from_response

__all__ = ["Endpoint", "default_socket", "parse_host", "is_loopback", "Target", "Transport", "Response", "Upgraded",
           # The stream protocol's constants, defined in _wire.
           "STREAM_PROTOCOL", "FRAME_STDIN", "FRAME_STDOUT", "FRAME_STDERR", "FRAME_EXIT", "MAX_FRAME"]


def default_socket(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """Returns the daemon's Unix socket as the airlock CLI computes it (package paths).

    ``$XDG_RUNTIME_DIR/airlock/airlockd.sock`` when ``XDG_RUNTIME_DIR`` is an
    absolute path; else on macOS ``~/Library/Application Support/airlock/run/airlockd.sock``;
    else ``$TMPDIR/airlock-<uid>/airlockd.sock`` (``/tmp`` without ``TMPDIR``).
    """
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    rt = env.get("XDG_RUNTIME_DIR", "")
    if rt and os.path.isabs(rt):
        return os.path.join(rt, "airlock", "airlockd.sock")
    if plat == "darwin":
        home = env.get("HOME") or os.path.expanduser("~")
        return os.path.join(home, "Library", "Application Support", "airlock", "run", "airlockd.sock")
    tmp = env.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"airlock-{os.getuid()}", "airlockd.sock")


def _describe_uid(uid: int) -> str:
    """``uid 1001 (bob)``, or ``uid 1001`` when the name is not known."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _owned_by(st: os.stat_result) -> str:
    return f" owned by {_describe_uid(st.st_uid)}" if st.st_uid != os.getuid() else ""


def check_runtime_dir(socket_path: str) -> None:
    """Checks the directory of the default socket (and the socket) as the airlock CLI does before it talks to it.

    The directory must be a real directory (not a symbolic link) owned by the
    current user with mode 0700, and the socket, when there is one, a socket
    of the user's own (or root's): in a directory another local user made
    first (``/tmp/airlock-<uid>``), the "daemon" answering could be theirs.
    Raises :class:`UnsafeRuntimeDirError`; a directory that does not exist
    raises :class:`DaemonUnreachableError` (no daemon runs).
    """
    d = os.path.dirname(socket_path)
    hint = ("set XDG_RUNTIME_DIR to a private directory of yours (`mkdir -m 0700 -p ~/.airlock-run && export "
            "XDG_RUNTIME_DIR=~/.airlock-run`, or /run/user/<uid> where the login manager made one), or have "
            f"{d} removed (its owner or root can)")

    def refuse(what: str, problem: str) -> UnsafeRuntimeDirError:
        return UnsafeRuntimeDirError(
            f"refusing to use {what}: it {problem}; airlock uses only a real directory of your own with mode 0700 "
            f"and a socket of yours in it: {hint}", path=what)

    try:
        st = os.lstat(d)
    except FileNotFoundError as e:
        raise DaemonUnreachableError(f"cannot reach the airlock daemon at {socket_path}: {d} does not exist "
                                     "(no daemon runs: `airlock daemon start`)") from e
    except OSError as e:
        raise DaemonUnreachableError(f"cannot examine {d}: {e}") from e
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(d)
        except OSError:
            target = "?"
        raise refuse(d, f"is a symbolic link (to {target}){_owned_by(st)}")
    if not stat.S_ISDIR(st.st_mode):
        raise refuse(d, "is not a directory" + _owned_by(st))
    if st.st_uid != os.getuid():
        raise refuse(d, f"belongs to {_describe_uid(st.st_uid)}, not to you ({_describe_uid(os.getuid())})")
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        raise refuse(d, f"has mode {mode:04o}, not 0700")
    try:
        sst = os.lstat(socket_path)
    except FileNotFoundError:
        return  # no daemon: connecting says so
    except OSError as e:
        raise DaemonUnreachableError(f"cannot examine {socket_path}: {e}") from e
    if not stat.S_ISSOCK(sst.st_mode):
        raise refuse(socket_path, "is not a socket" + _owned_by(sst))
    if sst.st_uid not in (os.getuid(), 0):
        raise refuse(socket_path, f"belongs to {_describe_uid(sst.st_uid)}, not to you ({_describe_uid(os.getuid())})")


@dataclass(frozen=True)
class Endpoint:
    """Where a daemon listens, parsed from a host string by :func:`parse_host`.

    ``scheme`` is ``unix`` (``path``), ``tcp`` (``host``, ``port``, ``tls``,
    ``ca``: the CA file to trust, empty for the system's) or ``ssh``
    (``host``, ``user``, ``port``).
    """

    scheme: str
    path: str = ""
    host: str = ""
    port: int | None = None
    user: str = ""
    tls: bool = False
    ca: str = ""


def is_loopback(host: str) -> bool:
    """Whether a host name or address is loopback (``localhost``, ``127.0.0.0/8``, ``::1``), as the daemon and CLI judge it."""
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


_ADDRESSES = "unix:///path, tcp://host:port, https://host:port, http://host:port (loopback) or ssh://[user@]host[:port]"


def parse_host(host: str, environ: Mapping[str, str] | None = None) -> Endpoint:
    """Parses a daemon address by the rule of the airlock CLI (and of every SDK).

    - ``unix:///path/airlockd.sock`` or an absolute path: a Unix socket;
    - ``tcp://host:port``: TCP with TLS unless the host is loopback and
      ``AIRLOCK_TLS_CA`` (in ``environ``, else the process's environment) is
      unset; TLS trusts that CA file, else the system's CAs;
    - ``https://host:port``: TLS; ``http://host:port``: plain HTTP, refused off
      loopback (the token would cross the network in clear);
    - ``ssh://[user@]host[:port]``.

    A bad address raises :class:`ValueError`.
    """
    env = os.environ if environ is None else environ
    if host.startswith("/"):
        return Endpoint("unix", path=host)
    u = urllib.parse.urlsplit(host)
    scheme = u.scheme.lower()
    if not scheme or "://" not in host:
        raise ValueError(f"{host!r}: not a daemon address ({_ADDRESSES})")
    if u.query or u.fragment:
        raise ValueError(f"{host!r}: a daemon address has no query or fragment")
    if scheme == "unix":
        if u.netloc or not u.path.startswith("/"):
            raise ValueError(f"{host!r}: a unix address needs an absolute path (unix:///path/to/airlockd.sock)")
        return Endpoint("unix", path=u.path)
    try:
        port = u.port
    except ValueError as e:
        raise ValueError(f"{host!r}: a bad port ({e})") from None
    if scheme in ("tcp", "http", "https"):
        if not u.hostname or not port or u.path not in ("", "/"):
            raise ValueError(f"{host!r}: a TCP address needs a host and a port ({scheme}://HOST:PORT)")
        if scheme == "http":
            if not is_loopback(u.hostname):
                hp = f"[{u.hostname}]:{port}" if ":" in u.hostname else f"{u.hostname}:{port}"
                raise ValueError(f"{host!r}: plain HTTP would send the token in clear off loopback; "
                                 f"use https://{hp} (or tcp://, TLS off loopback)")
            return Endpoint("tcp", host=u.hostname, port=port)
        ca = env.get("AIRLOCK_TLS_CA") or ""
        tls = scheme == "https" or bool(ca) or not is_loopback(u.hostname)
        return Endpoint("tcp", host=u.hostname, port=port, tls=tls, ca=ca if tls else "")
    if scheme == "ssh":
        if not u.hostname:
            raise ValueError(f"{host!r}: no host (ssh://[user@]host[:port])")
        if u.path not in ("", "/"):
            raise ValueError(f"{host!r}: an ssh address has no path (ssh://[user@]host[:port])")
        return Endpoint("ssh", host=u.hostname, user=u.username or "", port=port)
    raise ValueError(f"{host!r}: not a daemon address ({_ADDRESSES})")


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket."""

    def __init__(self, path: str, timeout: float | None, check_dir: bool = False) -> None:
        super().__init__(LOCAL_HOST, timeout=timeout)
        self._path = path
        self._check_dir = check_dir

    def connect(self) -> None:
        if self._check_dir:
            check_runtime_dir(self._path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class _SSHConnection(http.client.HTTPConnection):
    """HTTP over a stream of the client's one ``ssh … airlock daemon dial-stdio --mux`` (:mod:`airlock._mux`)."""

    def __init__(self, transport: Transport, timeout: float | None) -> None:
        super().__init__(LOCAL_HOST, timeout=timeout)
        self._transport = transport

    def connect(self) -> None:
        self.sock = self._transport._mux_session().open()


class Response:
    """An answer being read: its status, headers and body, and the connection it holds.

    Close it (or use it as a context manager) once read; :meth:`read_all` and
    iterating :meth:`lines` to their end close it too.
    """

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp
        self.status: int = resp.status
        self.headers = resp.headers

    def read_all(self) -> bytes:
        """The whole body; closes the response."""
        try:
            return self._resp.read()
        finally:
            self.close()

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes of the body (all with -1)."""
        return self._resp.read(n)

    def readline(self) -> bytes:
        """The next line of the body, with its newline (b"" at the end)."""
        return self._resp.readline()

    def read1(self, n: int) -> bytes:
        """Up to n bytes of the body, what came (at least one byte; b"" at the end)."""
        return self._resp.read1(n)

    def set_timeout(self, timeout: float | None) -> None:
        """Bounds each later read of the body (not on ssh)."""
        sock = self._conn.sock
        if sock is not None:
            sock.settimeout(timeout)

    def close(self) -> None:
        """Closes the body and the connection."""
        try:
            self._resp.close()
        finally:
            self._conn.close()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Upgraded:
    """A connection switched to the daemon's stream protocol: frames both ways.

    Each frame is an 8-byte header (its type, three zero bytes, the payload's
    length as a big-endian uint32) and the payload. Made by
    :meth:`Transport.upgrade`; close it once done.
    """

    def __init__(self, resp: Response) -> None:
        self._resp = resp
        fp = resp._resp.fp
        sock = resp._conn.sock
        if fp is None or sock is None:
            raise ProtocolError("the upgraded connection is closed")
        self._r: IO[bytes] = fp
        self._sock = sock
        self._send_lock = threading.Lock()

    def send(self, data: bytes) -> None:
        """Sends bytes already framed (:func:`airlock._wire.encode_frames`)."""
        with self._send_lock:
            self._sock.sendall(data)

    def send_frame(self, typ: int, payload: bytes = b"") -> None:
        """Sends one frame (a payload longer than a frame allows is split)."""
        self.send(encode_frames(typ, payload))

    def _read_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            b = self._r.read(n - len(buf))
            if not b:
                return None
            buf += b
        return bytes(buf)

    def read_frame(self) -> tuple[int, bytes] | None:
        """The next frame's type and payload; None once the daemon closed the connection."""
        hdr = self._read_exact(FRAME_HEADER)
        if hdr is None:
            return None
        typ, n = frame_length(hdr)
        payload = self._read_exact(n)
        if payload is None:
            raise ProtocolError("the stream ended within a frame")
        return typ, payload

    def shutdown(self) -> None:
        """Ends the connection both ways at once, waking a thread blocked reading it (close it still)."""
        shut = getattr(self._sock, "shutdown", None)
        try:
            if shut is not None:
                shut(socket.SHUT_RDWR)
            else:
                self._sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Closes the connection."""
        self._resp.close()

    def __enter__(self) -> Upgraded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Target:
    """Which daemon a client talks to and how: what both transports (sync and asyncio) share."""

    endpoint: Endpoint
    token: str | None = None
    timeout: float | None = 60.0
    tls_context: ssl.SSLContext | None = None
    ssh_command: Sequence[str] = ("ssh",)
    ssh_options: Sequence[str] = ()
    remote_command: Sequence[str] = ("airlock", "daemon", "dial-stdio")
    #: The socket is the user's default one: its directory is checked before each connection.
    check_runtime_dir: bool = False

    @classmethod
    def resolve(
        cls,
        host: str | None,
        *,
        token: str | None,
        tls_ca: str | None,
        tls_context: ssl.SSLContext | None,
        timeout: float | None,
        ssh_options: Sequence[str],
        ssh_command: Sequence[str],
        remote_command: Sequence[str],
    ) -> Any:
        """The transport for a client's arguments (see :class:`airlock.Client`), ``AIRLOCK_*`` filling the gaps."""
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
        return cls(endpoint, token=token, timeout=timeout, tls_context=tls_context, ssh_command=tuple(ssh_command),
                   ssh_options=tuple(ssh_options), remote_command=tuple(remote_command), check_runtime_dir=default)

    def describe(self) -> str:
        """The daemon's address, for messages."""
        ep = self.endpoint
        if ep.scheme == "unix":
            return ep.path
        if ep.scheme == "ssh":
            return "ssh://" + (ep.user + "@" if ep.user else "") + ep.host + (f":{ep.port}" if ep.port else "")
        host = f"[{ep.host}]" if ":" in ep.host else ep.host
        return ("https://" if ep.tls else "http://") + f"{host}:{ep.port}"

    def ssh_argv(self) -> list[str]:
        """The command line that reaches an ssh daemon (``ssh … HOST airlock daemon dial-stdio``)."""
        ep = self.endpoint
        argv = list(self.ssh_command) + ["-T"] + list(self.ssh_options)
        if ep.user:
            argv += ["-l", ep.user]
        if ep.port:
            argv += ["-p", str(ep.port)]
        return argv + ["--", ep.host] + list(self.remote_command)

    def head_fields(self, req: Request) -> list[tuple[str, str]]:
        """The header lines of a request to this daemon."""
        ep = self.endpoint
        return head_fields(req, LOCAL_HOST if ep.scheme != "tcp" else f"{ep.host}:{ep.port}", self.token)


@dataclass
class Transport(Target):
    """Sends requests to one daemon with blocking I/O. Made by :class:`airlock.Client`."""

    _tls: ssl.SSLContext | None = field(default=None, init=False, repr=False)
    _mux: SyncMux | None = field(default=None, init=False, repr=False)
    _mux_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def _mux_session(self) -> SyncMux:
        """The client's one ssh connection, started on first use (again once it ended)."""
        with self._mux_lock:
            if self._mux is None or not self._mux.alive:
                if self._mux is not None:
                    self._mux.close()
                self._mux = SyncMux(self.ssh_argv() + ["--mux"], self.describe())
            return self._mux

    def close(self) -> None:
        """Ends the client's ssh connection, if it has one."""
        with self._mux_lock:
            if self._mux is not None:
                self._mux.close()
                self._mux = None

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        ep = self.endpoint
        if ep.scheme == "unix":
            return _UnixConnection(ep.path, timeout, self.check_runtime_dir)
        if ep.scheme == "ssh":
            return _SSHConnection(self, timeout)
        assert ep.port is not None
        if ep.tls:
            if self._tls is None:
                self._tls = self.tls_context or ssl.create_default_context()
            return http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | Iterable[tuple[str, str]] | None = None,
        body: bytes | IO[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
    ) -> Response:
        """Sends a request and returns its answer once the status is read (:meth:`send` of a :class:`Request`)."""
        q = query if query is None or isinstance(query, Mapping) else list(query)
        return self.send(Request(method, path, query=q, body=body, headers=headers or {}, stream=stream))

    def send(self, req: Request) -> Response:
        """Sends a request and returns its answer once the status is read.

        An error status raises the :class:`airlock.AirlockError` its body names.
        With ``req.stream`` the body is read without a timeout (events, a
        streamed exec); else each read is bounded by the transport's timeout. A
        body given as a file is sent chunked.
        """
        conn = self._connection(self.timeout)
        try:
            try:
                conn.connect()
            except DaemonUnreachableError:
                raise
            except (OSError, ssl.SSLError) as e:
                raise DaemonUnreachableError(unreachable(self.describe(), e)) from e
            conn.putrequest(req.method, req.target, skip_host=True, skip_accept_encoding=True)
            for k, v in self.head_fields(req):
                conn.putheader(k, v)
            if req.body is None:
                conn.endheaders()
            elif isinstance(req.body, (bytes, bytearray, memoryview)):
                conn.endheaders(bytes(req.body))
            else:
                conn.endheaders()
                while piece := req.body.read(BODY_CHUNK):
                    conn.send(chunk(piece))
                conn.send(chunk(b""))
            resp = conn.getresponse()
        except DaemonUnreachableError:
            conn.close()
            raise
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise DaemonUnreachableError(no_answer(self.describe(), req, e)) from e
        except BaseException:
            conn.close()
            raise
        out = Response(conn, resp)
        if resp.status >= 400:
            try:
                data = out.read_all()
            except (OSError, http.client.HTTPException):
                data = b""
            raise error_from_response(resp.status, data)
        if req.stream:
            out.set_timeout(None)
        return out

    def attach(self, req: Request) -> Upgraded:
        """Sends a request asking to switch to the stream protocol (101) and returns the frames' connection."""
        resp = self.send(req)
        if resp.status != 101:
            resp.close()
            raise not_switched(resp.status)
        try:
            return Upgraded(resp)
        except BaseException:
            resp.close()
            raise

    def upgrade(self, path: str, body: bytes) -> Upgraded:
        """POSTs a JSON body asking to switch to the stream protocol (101), and returns the frames' connection."""
        return self.attach(Request("POST", path, body=body, headers=UPGRADE_HEADERS, stream=True))
