"""Exec control: timeouts, background execs and their handles (docs/api.md, Exec control)."""

from __future__ import annotations

import json
import math
import threading
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .errors import ProtocolError, WaitTimeoutError
from .models import ExecInfo, ExecResult

if TYPE_CHECKING:
    from .client import Sandbox

#: The longest timeout or kill grace the daemon takes, in seconds (a year).
MAX_SECONDS = 365 * 24 * 3600

OutputCallback = Callable[[bytes], Any]


def control_fields(timeout: float | None, kill_grace: float | None, background: bool) -> dict[str, Any]:
    """The exec request's control fields, checked (:class:`ValueError` naming the field)."""
    out: dict[str, Any] = {}
    for name, v in (("timeout", timeout), ("kill_grace", kill_grace)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}: a number of seconds, not {type(v).__name__}")
        if math.isnan(v) or v < 0 or v > MAX_SECONDS:
            raise ValueError(f"{name}: must be between 0 and {MAX_SECONDS} seconds (a year), not {v:g}")
        if v:
            out[name] = float(v)
    if background:
        out["background"] = True
    return out


def _path(sandbox_id: str, exec_id: str, *rest: str) -> str:
    parts = ["v1", "sandboxes", sandbox_id, "execs", exec_id, *rest]
    return "/" + "/".join(urllib.parse.quote(p, safe="") for p in parts)


class Exec:
    """A handle of an exec that runs in the background (``Sandbox.run(…, background=True)``).

    Its output goes to files the daemon keeps; :meth:`output` reads them from
    any byte, :meth:`wait` waits for the end, :meth:`signal` and :meth:`kill`
    reach the command's process group. With ``on_stdout``/``on_stderr`` a thread
    follows the output and hands each chunk to them as it comes.
    """

    def __init__(self, sandbox: Sandbox, info: ExecInfo, *, on_stdout: OutputCallback | None = None,
                 on_stderr: OutputCallback | None = None) -> None:
        self.sandbox = sandbox
        self.id = info.id
        self._info = info
        self._followers: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        for stream, cb in (("stdout", on_stdout), ("stderr", on_stderr)):
            if cb is not None:
                t = threading.Thread(target=self._follow, args=(stream, cb), daemon=True, name=f"airlock-exec-{stream}")
                t.start()
                self._followers.append(t)

    def __repr__(self) -> str:
        return f"Exec(id={self.id!r}, sandbox={self.sandbox.id!r})"

    def _follow(self, stream: str, cb: OutputCallback) -> None:
        try:
            for chunk in self.output(stream, follow=True):
                cb(chunk)
        except BaseException as e:  # handed to wait()
            self._errors.append(e)

    def info(self) -> ExecInfo:
        """The exec's record now (``GET …/execs/{exec}``)."""
        resp = self.sandbox.client._t.request("GET", _path(self.sandbox.id, self.id))
        self._info = ExecInfo.from_json(json.loads(resp.read_all() or b"{}"))
        return self._info

    @property
    def running(self) -> bool:
        """Whether the exec has not ended (asks the daemon)."""
        return self.info().exit_code is None

    def signal(self, signal: str | int) -> ExecInfo:
        """Sends ``signal`` (``"TERM"``, ``"SIGINT"``, ``9``) to the exec's process group."""
        body = json.dumps({"signal": str(signal)}).encode("utf-8")
        resp = self.sandbox.client._t.request("POST", _path(self.sandbox.id, self.id, "signal"), body=body,
                                              headers={"Content-Type": "application/json"})
        return ExecInfo.from_json(json.loads(resp.read_all() or b"{}"))

    def kill(self) -> ExecInfo:
        """Sends SIGKILL to the exec's process group."""
        return self.signal("KILL")

    def output(self, stream: str = "stdout", *, start: int = 0, follow: bool = False) -> Iterator[bytes]:
        """The bytes of an output file (``stream`` ``"stdout"`` or ``"stderr"``) from byte ``start``.

        With ``follow`` it goes on with what the command writes until it ends.
        """
        q: dict[str, str | int] = {"stream": stream}
        if start:
            q["from"] = start
        if follow:
            q["follow"] = 1
        resp = self.sandbox.client._t.request("GET", _path(self.sandbox.id, self.id, "output"), query=q, stream=follow)
        with resp:
            while True:
                try:
                    chunk = resp._resp.read1(64 << 10)
                except OSError as e:
                    raise ProtocolError(f"the output of exec {self.id} broke: {e}") from e
                if not chunk:
                    return
                yield chunk

    def wait(self, timeout: float | None = None) -> ExecResult:
        """Waits for the exec's end and returns its exit code and whole output.

        :class:`WaitTimeoutError` after ``timeout`` seconds (the exec runs on).
        """
        info = self.info()
        if info.exit_code is None:
            last = self.sandbox.refresh().last_seq
            with self.sandbox.events(from_seq=last, follow=True, timeout=timeout) as evs:
                info = self.info()
                if info.exit_code is None:
                    for ev in evs:
                        if ev.kind == "exec.finished" and ev.exec_id == self.id:
                            break
                    info = self.info()
        for t in self._followers:
            t.join(timeout)
            if t.is_alive():
                raise WaitTimeoutError(f"the output of exec {self.id} is still being read")
        if self._errors:
            raise self._errors[0]
        if info.exit_code is None:
            raise ProtocolError(f"exec {self.id} has no exit code after its end")
        out = b"".join(self.output("stdout"))
        err = b"".join(self.output("stderr"))
        return ExecResult(exit_code=info.exit_code, stdout=out, stderr=err, exec_id=self.id, sandbox_id="")
