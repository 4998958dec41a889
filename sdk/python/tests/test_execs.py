"""Tests of exec control in the SDK: run(timeout=…, on_stdout=…, background=…), Exec.kill/signal/wait/output, execs().

The daemon tests run against a control daemon of this module's own (as
test_sdk.py's) and the real Docker Engine; without AIRLOCK_BINARY and
AIRLOCK_TEST_IMAGE they are skipped.
"""

from __future__ import annotations

import os
import time
import unittest
import uuid

from _daemon import Daemon

import airlock
from airlock._execs import control_fields

IMAGE = os.environ.get("AIRLOCK_TEST_IMAGE", "")

_daemon: Daemon | None = None


def setUpModule() -> None:
    global _daemon
    if os.environ.get("AIRLOCK_BINARY") and IMAGE:
        _daemon = Daemon()


def tearDownModule() -> None:
    if _daemon is not None:
        _daemon.stop()


class ExecControlUnitTest(unittest.TestCase):
    """What needs no daemon."""

    def test_control_fields(self) -> None:
        self.assertEqual(control_fields(None, None, False), {})
        self.assertEqual(control_fields(2, 0.5, True), {"timeout": 2.0, "kill_grace": 0.5, "background": True})
        for bad in (-1, 4e7, float("nan")):
            with self.assertRaises(ValueError, msg=bad):
                control_fields(bad, None, False)
        with self.assertRaises(TypeError):
            control_fields("5s", None, False)  # type: ignore[arg-type]

    def test_record(self) -> None:
        info = airlock.ExecInfo.from_json({"id": "x", "sandbox_id": "s", "cmd": ["sleep"], "started_at": "t",
                                           "exit_code": 124, "timed_out": True})
        self.assertEqual((info.exit_code, info.timed_out), (124, True))
        self.assertFalse(airlock.ExecInfo.from_json({"id": "y"}).timed_out)


class ExecControlTest(unittest.TestCase):
    """Against the daemon: a timeout, output callbacks, a background exec killed, a stream closed."""

    client: airlock.Client
    sb: airlock.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client
        cls.sb = cls.client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n', id=f"sdk-execs-{uuid.uuid4().hex[:12]}")

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
        info = self.sb.exec(res.exec_id).info()
        self.assertTrue(info.timed_out)
        self.assertEqual(self.sb.run("exit 3", timeout=30).exit_code, 3)

    def test_callbacks(self) -> None:
        out: list[bytes] = []
        err: list[bytes] = []
        res = self.sb.run("echo one; sleep 0.2; echo two >&2; echo three", on_stdout=out.append, on_stderr=err.append)
        self.assertEqual((b"".join(out), b"".join(err)), (b"one\nthree\n", b"two\n"))
        self.assertEqual(res.stdout, b"one\nthree\n")

    def test_background(self) -> None:
        chunks: list[bytes] = []
        ex = self.sb.run("echo first; sleep 0.3; echo second", background=True, on_stdout=chunks.append)
        self.assertIsInstance(ex, airlock.Exec)
        res = ex.wait(timeout=30)
        self.assertEqual((res.exit_code, res.stdout_text), (0, "first\nsecond\n"))
        self.assertEqual(b"".join(chunks), b"first\nsecond\n")
        self.assertEqual(b"".join(ex.output(start=6)), b"second\n")
        with self.assertRaises(airlock.InvalidStateError):
            ex.kill()

        sleeper = self.sb.run("sleep 305", background=True)
        self.assertIn(sleeper.id, [e.id for e in self.sb.execs(running=True)])
        deadline = time.monotonic() + 15
        while not self.running("sleep 305"):
            self.assertLess(time.monotonic(), deadline, "the background sleep 305 does not run")
            time.sleep(0.1)
        sleeper.kill()
        self.assertEqual(sleeper.wait(timeout=30).exit_code, 137)
        self.assertNotIn(sleeper.id, [e.id for e in self.sb.execs(running=True)])
        every = self.sb.execs()
        self.assertIn(sleeper.id, [e.id for e in every])
        self.assertEqual([e.id for e in self.sb.execs(limit=1)], [every[-1].id])

        trapped = self.sb.run("trap 'echo term; exit 9' TERM; echo ready; while :; do sleep 0.1; done", background=True)
        for chunk in trapped.output(follow=True):
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


if __name__ == "__main__":
    unittest.main()
