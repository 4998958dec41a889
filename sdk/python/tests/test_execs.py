"""Tests of exec control in the SDK, through both clients: run(timeout=…, on_stdout=…, background=…), the exec
handle (wait, kill, signal, output), execs() and exec(id).

The daemon tests run against a control daemon of this module's own (as
test_sdk.py's) and the real Docker Engine; without AIRLOCK_BINARY and
AIRLOCK_TEST_IMAGE they are skipped.
"""

from __future__ import annotations

import asyncio
import os
import time
import unittest
import uuid
from typing import Any

import _bridge
from _bridge import Flavor, both_clients
from _daemon import Daemon

import airlock
import airlock.aio
from airlock._ops import exec_control

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


class ExecControlUnitTest(unittest.TestCase):
    """What needs no daemon."""

    def test_control_fields(self) -> None:
        self.assertEqual(exec_control(None, None, False), {})
        self.assertEqual(exec_control(2, 0.5, True), {"timeout": 2.0, "kill_grace": 0.5, "background": True})
        for bad in (-1, 4e7, float("nan")):
            with self.assertRaises(ValueError, msg=bad):
                exec_control(bad, None, False)
        with self.assertRaises(TypeError):
            exec_control("5s", None, False)  # type: ignore[arg-type]

    def test_record(self) -> None:
        info = airlock.ExecInfo.from_json({"id": "x", "sandbox_id": "s", "cmd": ["sleep"], "started_at": "t",
                                           "exit_code": 124, "timed_out": True})
        self.assertEqual((info.exit_code, info.timed_out), (124, True))
        self.assertFalse(airlock.ExecInfo.from_json({"id": "y"}).timed_out)

    def test_exported(self) -> None:
        self.assertIs(airlock.AsyncExec, airlock.aio.AsyncExec)
        self.assertIn("Exec", airlock.__all__)
        self.assertIn("AsyncExec", airlock.__all__)


@both_clients
class ExecControlTest(Flavor, unittest.TestCase):
    """Against the daemon: a timeout, output callbacks, a background exec killed and signalled, a stream closed."""

    client: Any  # airlock.Client, or the asyncio client's view
    sb: Any

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client if cls.flavor == "sync" else cls.Client(_daemon.socket, timeout=60)
        cls.sb = cls.client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n',
                                   id=f"sdk-execs-{uuid.uuid4().hex[:12]}")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.delete()

    def running(self, marker: str) -> bool:
        return marker in self.sb.run(["ps", "-o", "args"]).stdout_text

    def test_timeout(self) -> None:
        started = time.monotonic()
        res = self.sb.run("echo up; sleep 8", timeout=1)
        self.assertLess(time.monotonic() - started, 7)
        self.assertEqual((res.exit_code, res.stdout_text), (124, "up\n"))
        self.assertTrue(self.sb.exec(res.exec_id).info().timed_out)
        with self.sb.exec_stream("echo up; sleep 8", timeout=1, kill_grace=0.5) as s:
            self.assertEqual(s.result().exit_code, 124)
        self.assertEqual(self.sb.run("exit 3", timeout=30).exit_code, 3)
        with self.assertRaises(ValueError):
            self.sb.run("true", timeout=-1)

    def test_callbacks(self) -> None:
        out: list[bytes] = []
        err: list[bytes] = []
        res = self.sb.run("echo one; sleep 0.2; echo two >&2; echo three", on_stdout=out.append, on_stderr=err.append)
        self.assertEqual((b"".join(out), b"".join(err)), (b"one\nthree\n", b"two\n"))
        self.assertEqual(res.stdout, b"one\nthree\n")

    def test_background(self) -> None:
        chunks: list[bytes] = []
        ex = self.sb.run("echo first; sleep 0.3; echo second", background=True, on_stdout=chunks.append)
        self.assertEqual(ex.id, ex.info().id)
        res = ex.wait(timeout=30)
        self.assertEqual((res.exit_code, res.stdout_text), (0, "first\nsecond\n"))
        self.assertEqual(b"".join(chunks), b"first\nsecond\n")
        with ex.output(start=6) as rest:
            self.assertEqual(b"".join(rest), b"second\n")
        self.assertFalse(ex.running)
        with self.assertRaises(airlock.InvalidStateError):
            ex.kill()

        sleeper = self.sb.run("sleep 305", background=True)
        self.assertIn(sleeper.id, [e.id for e in self.sb.execs(running=True)])
        deadline = time.monotonic() + 15
        while not self.running("sleep 305"):
            self.assertLess(time.monotonic(), deadline, "the background sleep 305 does not run")
            time.sleep(0.1)
        self.assertTrue(sleeper.running)
        with self.assertRaises(airlock.WaitTimeoutError):
            sleeper.wait(timeout=0.5)
        sleeper.kill()
        self.assertEqual(sleeper.wait(timeout=30).exit_code, 137)
        self.assertNotIn(sleeper.id, [e.id for e in self.sb.execs(running=True)])
        every = self.sb.execs()
        self.assertIn(sleeper.id, [e.id for e in every])
        self.assertEqual([e.id for e in self.sb.execs(limit=1)], [every[-1].id])
        # A handle found again by its ID.
        self.assertEqual(self.sb.exec(sleeper.id).wait(timeout=30).exit_code, 137)
        with self.assertRaises(airlock.ExecNotFoundError):
            self.sb.exec("no-such-exec")

        trapped = self.sb.run("trap 'echo term; exit 9' TERM; echo ready; while :; do sleep 0.1; done",
                              background=True)
        with trapped.output(follow=True) as out:
            for chunk in out:
                if b"ready" in chunk:
                    break
        trapped.signal("TERM")
        res = trapped.wait(timeout=30)
        self.assertEqual((res.exit_code, res.stdout_text), (9, "ready\nterm\n"))
        with self.assertRaises(ValueError):
            self.sb.run("cat", stdin="x", background=True)

    def test_stream_closed(self) -> None:
        with self.sb.exec_stream("echo up; sleep 304") as s:
            for frame in s:
                if frame.stream == "stdout":
                    break
        deadline = time.monotonic() + 15
        while self.running("sleep 304"):
            self.assertLess(time.monotonic(), deadline, "sleep 304 still runs after its stream was closed")
            time.sleep(0.2)


class AsyncExecNativeTest(unittest.IsolatedAsyncioTestCase):
    """airlock.aio's exec handle as a program uses it: coroutine callbacks, async for over the output."""

    async def test_async(self) -> None:
        if _daemon is None:
            self.skipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        client = airlock.aio.AsyncClient(_daemon.socket, timeout=60)
        async with await client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n',
                                       id=f"sdk-aexecs-{uuid.uuid4().hex[:12]}") as sb:
            got: list[bytes] = []

            async def on_stdout(chunk: bytes) -> None:
                await asyncio.sleep(0)
                got.append(chunk)

            res = await sb.run("echo a; sleep 0.1; echo b", on_stdout=on_stdout)
            self.assertEqual((res.stdout, b"".join(got)), (b"a\nb\n", b"a\nb\n"))

            got.clear()
            ex = await sb.run("echo x; sleep 0.2; echo y", background=True, on_stdout=on_stdout)
            self.assertIsInstance(ex, airlock.aio.AsyncExec)
            res = await ex.wait(timeout=30)
            self.assertEqual((res.exit_code, res.stdout, b"".join(got)), (0, b"x\ny\n", b"x\ny\n"))
            async with ex.output(follow=True) as out:
                self.assertEqual(b"".join([c async for c in out]), b"x\ny\n")
            self.assertFalse(await ex.running)


if __name__ == "__main__":
    unittest.main()
