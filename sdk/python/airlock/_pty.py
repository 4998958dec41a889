"""A command on a terminal of its own (``Sandbox.pty``): :class:`Pty`, and what the asyncio one shares.

It is the daemon's attached exec with ``"tty": true`` (docs/api.md, Exec,
attached): ``POST …/execs`` asking to switch to the stream protocol, then
frames both ways — keystrokes in (type 0), the terminal's output out (1), a
size (4) or a signal (5) in, the exit frame (3) last. The request and the
frames are built here, for both clients; :mod:`airlock._aiopty` is the asyncio
handle.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._ops import exec_control
from ._transport import Upgraded
from ._wire import (FRAME_EXIT, FRAME_STDERR, FRAME_STDIN, FRAME_STDOUT, Command, Request, argv, as_bytes,
                    encode_frames, env_list, sandbox_path, upgrade_request)
from .errors import EngineError, InvalidStateError, ProtocolError, WaitTimeoutError

if TYPE_CHECKING:
    from .client import Sandbox

#: Frame types a client sends on a terminal besides its input (docs/api.md).
FRAME_RESIZE, FRAME_SIGNAL = 4, 5

#: The largest terminal side the SDK sends (the kernel's winsize holds 16 bits).
MAX_SIDE = 0xFFFF

#: Signal names the daemon takes (Linux's), without SIG.
SIGNALS = frozenset("""HUP INT QUIT ILL TRAP ABRT IOT BUS FPE KILL USR1 SEGV USR2 PIPE ALRM TERM STKFLT CHLD CONT STOP
TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO POLL PWR SYS""".split())

#: Called with each chunk of the terminal's output as it comes.
DataCallback = Callable[[bytes], Any]


def pty_request(sandbox_id: str, cmd: Command | None, *, cols: int, rows: int,
                env: Mapping[str, str] | Sequence[str] | None, workdir: str | None, id: str | None,
                timeout: float | None, kill_grace: float | None) -> Request:
    """``POST …/execs`` with ``"tty": true`` and the upgrade headers; no ``cmd``: the sandbox's shell."""
    check_size(cols, rows)
    body: dict[str, Any] = {"tty": True, "width": cols, "height": rows, **exec_control(timeout, kill_grace, False)}
    if cmd is None:
        body["shell"] = True
    else:
        body["cmd"] = argv(cmd)
    if id is not None:
        body["id"] = id
    if (e := env_list(env)) is not None:
        body["env"] = e
    if workdir is not None:
        body["workdir"] = workdir
    return upgrade_request(sandbox_path(sandbox_id, "execs"), body)


def check_size(cols: int, rows: int) -> None:
    """A terminal size, checked (:class:`ValueError` naming the side)."""
    for name, v in (("cols", cols), ("rows", rows)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name}: a number of characters, not {type(v).__name__}")
        if not 1 <= v <= MAX_SIDE:
            raise ValueError(f"{name}: must be between 1 and {MAX_SIDE}, not {v}")


def input_frames(data: bytes | str) -> bytes:
    """Keystrokes (text is UTF-8) as stdin frames; nothing for none (an empty frame would end stdin)."""
    raw = as_bytes(data)
    return encode_frames(FRAME_STDIN, raw) if raw else b""


def resize_frame(cols: int, rows: int) -> bytes:
    """The frame of a terminal size."""
    check_size(cols, rows)
    return encode_frames(FRAME_RESIZE, json.dumps({"height": rows, "width": cols}).encode())


def signal_frame(signal: str | int) -> bytes:
    """The frame of a signal: a name (``"TERM"``, ``"SIGINT"``) or a number (:class:`ValueError` when neither)."""
    if isinstance(signal, bool) or not isinstance(signal, (str, int)):
        raise TypeError(f"signal: a name or a number, not {type(signal).__name__}")
    s = str(signal).strip()
    if s.isdigit():
        if not 1 <= int(s) <= 64:
            raise ValueError(f"signal: a number from 1 to 64, not {s}")
    elif s.upper().removeprefix("SIG") not in SIGNALS:
        raise ValueError(f"signal: not a signal name (TERM, SIGINT, …) or number: {signal!r}")
    return encode_frames(FRAME_SIGNAL, json.dumps({"signal": s}).encode())


def pty_exit(payload: bytes) -> tuple[str, int]:
    """The exec's ID and exit code of an exit frame (:class:`EngineError` when the daemon could not tell it)."""
    try:
        doc = json.loads(payload)
    except ValueError as e:
        raise ProtocolError(f"an exit frame that is not JSON: {payload[:200]!r}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("exit_code"), int):
        raise ProtocolError(f"an exit frame without an exit code: {payload[:200]!r}")
    exec_id = str(doc.get("exec_id") or "")
    if doc.get("error"):
        raise EngineError(f"cannot tell the exit code of exec {exec_id}: {doc['error']}")
    return exec_id, int(doc["exit_code"])


def ended_early() -> ProtocolError:
    """The error of a terminal whose stream ended before the exit frame."""
    return ProtocolError("the terminal's stream ended before the command's exit code")


def broken(e: BaseException) -> ProtocolError:
    """The error of a terminal whose stream broke."""
    return ProtocolError(f"the terminal's stream broke: {e}")


class Pty:
    """A command running on a terminal in the sandbox (:meth:`Sandbox.pty`).

    :meth:`write` types into it, :meth:`read` (or iterating) gives the
    terminal's output as it comes — what the command writes and the
    terminal's echo of what was typed, ``\\r\\n`` at line ends —
    :meth:`resize` and :meth:`signal` reach it, :meth:`wait` returns its exit
    code. :meth:`close` (or the end of a ``with`` block) kills a command still
    running (SIGTERM, SIGKILL after its ``kill_grace``), as for any exec whose
    client went away.

    A thread reads the terminal from the start: output not read yet is kept;
    with ``on_data`` each chunk goes to it instead, in that thread.
    """

    def __init__(self, sandbox: Sandbox, conn: Upgraded, *, exec_id: str = "",
                 on_data: DataCallback | None = None) -> None:
        self.sandbox: Sandbox = sandbox
        #: The exec's ID: the one asked for, else known once it ended (the exit frame says it).
        self.exec_id: str = exec_id
        self._conn = conn
        self._on_data = on_data
        self._chunks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._eof = False
        self._exit_code: int | None = None
        self._error: BaseException | None = None
        self._ended = threading.Event()
        self._closing = False
        self._reader = threading.Thread(target=self._read_frames, name="airlock-pty", daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        return f"<airlock.Pty {self.exec_id or '?'} of sandbox {self.sandbox.id}>"

    def _read_frames(self) -> None:
        try:
            while True:
                try:
                    frame = self._conn.read_frame()
                except OSError as e:
                    raise broken(e) from e
                if frame is None:
                    raise ended_early()
                typ, payload = frame
                if typ in (FRAME_STDOUT, FRAME_STDERR) and payload:
                    if self._on_data is not None:
                        self._on_data(payload)
                    else:
                        self._chunks.put(payload)
                elif typ == FRAME_EXIT:
                    self.exec_id, self._exit_code = pty_exit(payload)
                    return
        except BaseException as e:
            if not self._closing:
                self._error = e
                self._conn.shutdown()  # an on_data that failed: the command is killed
        finally:
            self._chunks.put(None)
            self._ended.set()
            if not self._closing:
                self._conn.close()  # the daemon closes it after the exit frame anyway

    @property
    def exit_code(self) -> int | None:
        """The exit code, once the command ended (None before)."""
        return self._exit_code

    def write(self, data: bytes | str) -> None:
        """Types ``data`` (text is UTF-8) into the terminal: ``"\\x03"`` is Ctrl-C, ``"\\x04"`` Ctrl-D at a line's start.

        :class:`InvalidStateError` once the command ended or the terminal was closed.
        """
        self._send(input_frames(data), "write")

    def resize(self, cols: int, rows: int) -> None:
        """Sets the terminal's size (the command gets SIGWINCH)."""
        self._send(resize_frame(cols, rows), "resize")

    def signal(self, signal: str | int) -> None:
        """Sends ``signal`` (``"TERM"``, ``"SIGINT"``, ``9``) to the command's process group."""
        self._send(signal_frame(signal), "signal")

    def kill(self) -> None:
        """Sends SIGKILL to the command's process group."""
        self.signal("KILL")

    def _send(self, frames: bytes, what: str) -> None:
        if self._ended.is_set() or self._closing:
            raise InvalidStateError(f"cannot {what}: the terminal's command ended" if not self._closing
                                    else f"cannot {what}: the terminal was closed")
        if not frames:
            return
        try:
            self._conn.send(frames)
        except OSError as e:
            if self._ended.is_set():
                raise InvalidStateError(f"cannot {what}: the terminal's command ended") from e
            raise broken(e) from e

    def read(self, timeout: float | None = None) -> bytes:
        """The next chunk of the terminal's output as it comes; ``b""`` once the command ended and all was read.

        :class:`WaitTimeoutError` when nothing came within ``timeout``
        seconds; the chunk that comes later is read next. Not with ``on_data``
        (:class:`InvalidStateError`): the output goes there.
        """
        if self._on_data is not None:
            raise InvalidStateError("cannot read: the terminal's output goes to on_data")
        if self._eof:
            return b""
        try:
            chunk = self._chunks.get(timeout=timeout)
        except queue.Empty:
            raise WaitTimeoutError(f"no output from the terminal within {timeout} s") from None
        if chunk is None:
            self._eof = True
            return b""
        return chunk

    def __iter__(self) -> Pty:
        return self

    def __next__(self) -> bytes:
        if chunk := self.read():
            return chunk
        raise StopIteration

    def wait(self, timeout: float | None = None) -> int:
        """Waits for the command's end and returns its exit code; output not read stays for :meth:`read`.

        :class:`WaitTimeoutError` after ``timeout`` seconds (it runs on). An
        error of ``on_data`` is raised here (the command was killed).
        """
        if not self._ended.wait(timeout):
            raise WaitTimeoutError(f"the terminal's command did not end within {timeout} s")
        if self._error is not None:
            raise self._error
        if self._exit_code is None:
            raise InvalidStateError("the terminal was closed before its command ended")
        return self._exit_code

    def close(self) -> None:
        """Closes the terminal: a command still running is killed (SIGTERM, then SIGKILL after its grace)."""
        if not self._ended.is_set():
            self._closing = True
            self._conn.shutdown()
            self._reader.join(5)
        self._conn.close()

    def __enter__(self) -> Pty:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
