"""The handle of a background exec for the sync client: :class:`Exec` and its output, :class:`ExecOutput`.

The requests and what their answers mean are :mod:`airlock._ops`' (Exec
control), shared with :mod:`airlock._aioexecs`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from . import _ops
from ._transport import Response
from .errors import ProtocolError, WaitTimeoutError
from .models import ExecInfo, ExecResult

if TYPE_CHECKING:
    from .client import Sandbox

#: Called with each chunk of a command's output as it comes.
OutputCallback = Callable[[bytes], Any]

#: How much of an output is read at once.
CHUNK = 64 << 10


class ExecOutput:
    """The bytes of a background exec's output file, as they come: an iterator of chunks.

    Without follow it ends at the end of what was written; with follow it goes
    on until the command ends. Close it (or use ``with``) to stop early.
    """

    def __init__(self, resp: Response, exec_id: str) -> None:
        self._resp: Response | None = resp
        self._exec_id = exec_id

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._resp is None:
            raise StopIteration
        try:
            chunk = self._resp.read1(CHUNK)
        except OSError as e:
            self.close()
            raise ProtocolError(f"the output of exec {self._exec_id} broke: {e}") from e
        except BaseException:
            self.close()
            raise
        if not chunk:
            self.close()
            raise StopIteration
        return chunk

    def read(self) -> bytes:
        """The chunks left, joined."""
        return b"".join(self)

    def close(self) -> None:
        """Stops reading and closes the connection."""
        if self._resp is not None:
            resp, self._resp = self._resp, None
            resp.close()

    def __enter__(self) -> ExecOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Exec:
    """The handle of an exec that runs in the background (``Sandbox.run(…, background=True)``, ``Sandbox.exec(id)``).

    Its output goes to files the daemon keeps: :meth:`output` reads them from
    any byte, :meth:`wait` waits for the end, :meth:`signal` and :meth:`kill`
    reach the command's process group. With ``on_stdout``/``on_stderr`` a thread
    follows each output and hands every chunk to them as it comes.
    """

    def __init__(self, sandbox: Sandbox, info: ExecInfo, *, on_stdout: OutputCallback | None = None,
                 on_stderr: OutputCallback | None = None) -> None:
        self.sandbox: Sandbox = sandbox
        self.id: str = info.id
        self._info = info
        self._followers: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        for stream, cb in (("stdout", on_stdout), ("stderr", on_stderr)):
            if cb is not None:
                t = threading.Thread(target=self._follow, args=(stream, cb), daemon=True,
                                     name=f"airlock-exec-{stream}")
                t.start()
                self._followers.append(t)

    def __repr__(self) -> str:
        return f"<airlock.Exec {self.id} of sandbox {self.sandbox.id}>"

    def _follow(self, stream: str, cb: OutputCallback) -> None:
        try:
            with self.output(stream, follow=True) as out:
                for chunk in out:
                    cb(chunk)
        except BaseException as e:  # raised by wait()
            self._errors.append(e)

    def info(self) -> ExecInfo:
        """The exec's record now (``GET …/execs/{exec}``): ``exit_code`` once it ended, ``timed_out``."""
        self._info = self.sandbox.client._run(_ops.get_exec(self.sandbox.id, self.id))
        return self._info

    @property
    def running(self) -> bool:
        """Whether the exec has not ended yet (reads the record)."""
        return self.info().exit_code is None

    def signal(self, signal: str | int) -> ExecInfo:
        """Sends ``signal`` (``"TERM"``, ``"SIGINT"``, ``9``) to the exec's process group (:class:`InvalidStateError` once it ended)."""
        self._info = self.sandbox.client._run(_ops.signal_exec(self.sandbox.id, self.id, signal))
        return self._info

    def kill(self) -> ExecInfo:
        """Sends SIGKILL to the exec's process group."""
        return self.signal("KILL")

    def output(self, stream: str = "stdout", *, start: int = 0, follow: bool = False) -> ExecOutput:
        """The bytes of an output file (``stream`` ``"stdout"`` or ``"stderr"``) from byte ``start``, as chunks.

        With ``follow`` it goes on with what the command writes until it ends.
        """
        req = _ops.output_request(self.sandbox.id, self.id, stream, start=start, follow=follow)
        return ExecOutput(self.sandbox.client._t.send(req), self.id)

    def wait(self, timeout: float | None = None) -> ExecResult:
        """Waits for the exec's end and returns its exit code and whole output.

        :class:`WaitTimeoutError` after ``timeout`` seconds (the exec runs on).
        An error of an ``on_stdout``/``on_stderr`` callback is raised here.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        info = self.sandbox.client._run(_ops.wait_exec(self.sandbox.id, self.id, timeout))
        for t in self._followers:
            t.join(None if deadline is None else max(deadline - time.monotonic(), 1.0))
            if t.is_alive():
                raise WaitTimeoutError(f"the output of exec {self.id} is still being read")
        if self._errors:
            raise self._errors[0]
        self._info = info
        return self.sandbox.client._run(_ops.exec_result(self.sandbox.id, info))
