"""Tests of a command on a terminal in the SDK, through both clients: Sandbox.pty(…) and its handle
(write, read, resize, signal, wait, close).

The daemon tests run against a control daemon of this module's own (as
test_sdk.py's) and the real Docker Engine; without AIRLOCK_BINARY and
AIRLOCK_TEST_IMAGE they are skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import unittest
import uuid
from typing import Any

import _bridge
from _bridge import Flavor, both_clients
from _daemon import Daemon

import airlock
import airlock.aio
from airlock._pty import pty_request, resize_frame, signal_frame

IMAGE = os.environ.get("AIRLOCK_TEST_IMAGE", "")

_daemon: Daemon | None = None


def setUpModule() -> None:
    global _daemon
    if os.environ.get("AIRLOCK_BINARY") and IMAGE:
        _daemon = Daemon()


def tearDownModule() -> None:
    _bridge.close()
    if _daemon is not None:
        _daemon.stop()


class PtyUnitTest(unittest.TestCase):
    """What needs no daemon: the request, the frames, bad arguments."""

    def test_request(self) -> None:
        req = pty_request("sb 1", "tty", cols=100, rows=30, env={"A": "1"}, workdir="/tmp", id="t1", timeout=5,
                          kill_grace=None)
        self.assertEqual((req.method, req.path), ("POST", "/v1/sandboxes/sb%201/execs"))
        self.assertEqual((req.headers["Connection"], req.headers["Upgrade"]), ("Upgrade", "airlock-stream"))
        assert isinstance(req.body, bytes)
        self.assertEqual(json.loads(req.body), {"tty": True, "width": 100, "height": 30, "timeout": 5.0,
                                                "cmd": ["sh", "-c", "tty"], "id": "t1", "env": ["A=1"],
                                                "workdir": "/tmp"})
        shell = pty_request("x", None, cols=80, rows=24, env=None, workdir=None, id=None, timeout=None,
                            kill_grace=None)
        assert isinstance(shell.body, bytes)
        self.assertEqual(json.loads(shell.body), {"tty": True, "width": 80, "height": 24, "shell": True})

    def test_frames(self) -> None:
        self.assertEqual(resize_frame(120, 40), b"\x04\0\0\0\0\0\0\x1c" + b'{"height": 40, "width": 120}')
        self.assertEqual(signal_frame("SIGINT")[8:], b'{"signal": "SIGINT"}')
        self.assertEqual(signal_frame(9)[8:], b'{"signal": "9"}')

    def test_bad_arguments(self) -> None:
        for cols, rows in ((0, 24), (80, -1), (80, 70000)):
            with self.assertRaises(ValueError, msg=(cols, rows)):
                resize_frame(cols, rows)
        with self.assertRaisesRegex(ValueError, "cols"):
            pty_request("x", "sh", cols=0, rows=24, env=None, workdir=None, id=None, timeout=None, kill_grace=None)
        with self.assertRaises(TypeError):
            resize_frame("80", 24)  # type: ignore[arg-type]
        for bad in ("NOPE", "0", 65, ""):
            with self.assertRaises(ValueError, msg=bad):
                signal_frame(bad)

    def test_exported(self) -> None:
        self.assertIs(airlock.AsyncPty, airlock.aio.AsyncPty)
        self.assertIn("Pty", airlock.__all__)
        self.assertIn("AsyncPty", airlock.__all__)


def read_until(term: Any, marker: bytes, timeout: float = 30) -> bytes:
    """The terminal's output up to (and past) ``marker``; fails when it ends first or takes longer."""
    deadline = time.monotonic() + timeout
    buf = b""
    while marker not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {marker!r} from the terminal within {timeout} s: {buf!r}")
        chunk = term.read(timeout=left)
        if not chunk:
            raise AssertionError(f"the terminal ended before {marker!r}: {buf!r}")
        buf += chunk
    return buf


@both_clients
class PtyTest(Flavor, unittest.TestCase):
    """Against the daemon: a terminal, its size and a resize, input, a signal, the exit code, close killing."""

    client: Any  # airlock.Client, or the asyncio client's view
    sb: Any

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client if cls.flavor == "sync" else cls.Client(_daemon.socket, timeout=60)
        cls.sb = cls.client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n',
                                   id=f"sdk-pty-{uuid.uuid4().hex[:12]}")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.delete()

    def running(self, marker: str) -> bool:
        return marker in self.sb.run(["ps", "-o", "args"]).stdout_text

    def test_terminal(self) -> None:
        script = "tty; stty size; echo ready; read x; stty size; echo got $x; exit 7"
        with self.sb.pty(script, cols=100, rows=30, env={"GREETING": "hi"}) as term:
            seen = read_until(term, b"ready")
            self.assertRegex(seen.decode(), r"/dev/pts/\d+\r\n30 100\r\n")
            term.resize(120, 40)
            term.write("hello\n")
            self.assertEqual(term.wait(timeout=30), 7)
            self.assertEqual(term.exit_code, 7)
            rest = b"".join(term)  # what was not read yet stays, up to the end
            self.assertIn(b"40 120\r\ngot hello\r\n", rest)
            self.assertEqual(term.read(), b"")
            self.assertTrue(term.exec_id)
            self.assertEqual(self.sb.exec(term.exec_id).info().exit_code, 7)
            with self.assertRaises(airlock.InvalidStateError):
                term.write("late\n")

    def test_shell_env_workdir(self) -> None:
        with self.sb.pty(env={"GREETING": "hi"}, workdir="/tmp", id=f"pty-shell-{uuid.uuid4().hex[:8]}") as term:
            self.assertTrue(term.exec_id.startswith("pty-shell-"))
            term.write("echo $GREETING from $(pwd) $((6 * 7)); exit 3\n")
            self.assertEqual(term.wait(timeout=30), 3)
            self.assertIn(b"hi from /tmp 42", b"".join(term))

    def test_signal(self) -> None:
        with self.sb.pty("trap 'echo caught; exit 9' INT; echo ready; while :; do sleep 0.1; done") as term:
            read_until(term, b"ready")
            term.signal("INT")
            self.assertEqual(term.wait(timeout=30), 9)
            self.assertIn(b"caught", b"".join(term))
        with self.assertRaises(ValueError):
            term.signal("NOPE")

    def test_on_data_and_timeout(self) -> None:
        got: list[bytes] = []
        with self.sb.pty("echo up; sleep 30", timeout=1, kill_grace=0.5, on_data=got.append) as term:
            self.assertEqual(term.wait(timeout=30), 124)
            with self.assertRaises(airlock.InvalidStateError):
                term.read()
        self.assertEqual(b"".join(got), b"up\r\n")

    def test_close_kills(self) -> None:
        term = self.sb.pty("echo up; sleep 303")
        read_until(term, b"up")
        self.assertTrue(self.running("sleep 303"))
        term.close()
        with self.assertRaises(airlock.InvalidStateError):
            term.write("x")
        deadline = time.monotonic() + 15
        while self.running("sleep 303"):
            self.assertLess(time.monotonic(), deadline, "sleep 303 still runs after its terminal was closed")
            time.sleep(0.2)
        # The exec is recorded ended, killed.
        ended = [e for e in self.sb.execs() if e.cmd[-1:] == ["echo up; sleep 303"]]
        self.assertEqual(len(ended), 1)
        deadline = time.monotonic() + 15
        while self.sb.exec(ended[0].id).info().exit_code is None:
            self.assertLess(time.monotonic(), deadline, "the closed terminal's exec has no exit code")
            time.sleep(0.2)

    def test_bad_sandbox(self) -> None:
        with self.assertRaises(airlock.SandboxNotFoundError):
            self.client.sandbox("no-such-sandbox").pty("tty")
        with self.assertRaises(ValueError):
            self.sb.pty("tty", cols=0)


class AsyncPtyNativeTest(unittest.IsolatedAsyncioTestCase):
    """airlock.aio's terminal as a program uses it: async with, async for, a coroutine on_data."""

    async def test_async(self) -> None:
        if _daemon is None:
            self.skipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        client = airlock.aio.AsyncClient(_daemon.socket, timeout=60)
        async with await client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n',
                                       id=f"sdk-apty-{uuid.uuid4().hex[:12]}") as sb:
            async with await sb.pty("stty size; read x; echo got $x", cols=90, rows=20) as term:
                self.assertIsInstance(term, airlock.aio.AsyncPty)
                await term.write(b"abc\r")
                out = b"".join([chunk async for chunk in term])
                self.assertEqual(await term.wait(), 0)
            self.assertTrue(re.search(rb"20 90\r\n.*got abc\r\n", out, re.S), out)

            got: list[bytes] = []

            async def on_data(chunk: bytes) -> None:
                await asyncio.sleep(0)
                got.append(chunk)

            async with await sb.pty("echo one; sleep 0.1; echo two", on_data=on_data) as term:
                self.assertEqual(await term.wait(timeout=30), 0)
            self.assertEqual(b"".join(got), b"one\r\ntwo\r\n")

            term = await sb.pty("echo up; sleep 302")
            while b"up" not in await term.read(timeout=30):
                pass
            await term.close()
            deadline = time.monotonic() + 15
            while "sleep 302" in (await sb.run(["ps", "-o", "args"])).stdout_text:
                self.assertLess(time.monotonic(), deadline, "sleep 302 still runs after its terminal was closed")
                await asyncio.sleep(0.2)


if __name__ == "__main__":
    unittest.main()
