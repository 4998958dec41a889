"""Tests of pausing a sandbox in the SDK: Sandbox.pause(), Sandbox.unpause(), NotSupportedError, through both clients.

The daemon tests run against a control daemon of this module's own (as
test_sdk.py's) and the real Docker Engine; without AIRLOCK_BINARY and
AIRLOCK_TEST_IMAGE they are skipped.
"""

from __future__ import annotations

import json
import os
import time
import unittest
import uuid
from typing import Any

import _bridge
from _bridge import Flavor, both_clients
from _daemon import Daemon

import airlock
from airlock._lifetime import create_fields
from airlock.errors import error_from_response

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


class PauseUnitTest(unittest.TestCase):
    """What needs no daemon."""

    def test_not_supported(self) -> None:
        body = json.dumps({"reason": "not_supported", "message": "cannot pause sandbox x: …"}).encode()
        err = error_from_response(501, body)
        self.assertIsInstance(err, airlock.NotSupportedError)
        self.assertNotIsInstance(err, airlock.ServerError)  # no failure: retrying does not help
        self.assertEqual((err.status, err.reason), (501, "not_supported"))

    def test_on_idle_pause(self) -> None:
        self.assertEqual(create_fields(None, None, 5, "pause"), {"idle_timeout": 5.0, "on_idle": "pause"})
        with self.assertRaises(ValueError):
            create_fields(60, "pause", None, None)  # a deadline deletes or stops


@both_clients
class PauseTest(Flavor, unittest.TestCase):
    """Against the daemon: a daemon's in-memory counter frozen and going on after unpause."""

    client: Any  # airlock.Client, or the asyncio client's view

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client if cls.flavor == "sync" else cls.Client(_daemon.socket, timeout=60)

    def manifest(self) -> str:
        return (f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n\n'
                '[daemons.counter]\n'
                'command = ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.05; done"]\n'
                'timeout = 1\n')

    def counter(self, sb: Any) -> int:
        try:
            return int(sb.read_text("/tmp/counter").strip() or "0")
        except airlock.PathNotFoundError:
            return 0  # not written yet

    def test_pause_unpause(self) -> None:
        sb = self.client.create(self.manifest(), id=f"sdk-pause-{uuid.uuid4().hex[:12]}")
        self.addCleanup(sb.delete)
        deadline = time.monotonic() + 20
        while self.counter(sb) < 5:
            self.assertLess(time.monotonic(), deadline, "the counter daemon did not count")
            time.sleep(0.1)

        info = sb.pause()
        self.assertEqual(info.state, "paused")
        self.assertEqual(sb.refresh().state, "paused")
        before = self.counter(sb)  # files are read while paused
        time.sleep(0.5)
        self.assertEqual(self.counter(sb), before, "a paused daemon made progress")
        with self.assertRaises(airlock.InvalidStateError) as cm:
            sb.run("true")
        self.assertIn("paused", cm.exception.message)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(sb.pause().state, "paused")  # as it is

        info = sb.unpause()
        self.assertEqual(info.state, "ready")
        time.sleep(0.4)
        self.assertGreater(self.counter(sb), before)
        with sb.events(from_seq=0, follow=False) as stream:
            starts = [e for e in stream if e.kind == "daemon.started"]
        self.assertEqual(len(starts), 1, "the counter daemon restarted")
        self.assertEqual(sb.run("echo goes-on").stdout_text, "goes-on\n")
        with sb.events(from_seq=0, follow=False) as stream:
            kinds = [e.kind for e in stream]
        self.assertLess(kinds.index("sandbox.paused"), kinds.index("sandbox.unpaused"))

    def test_on_idle_pause(self) -> None:
        sb = self.client.create(self.manifest(), id=f"sdk-idlepause-{uuid.uuid4().hex[:12]}", idle_timeout=2, on_idle="pause")
        self.addCleanup(sb.delete)
        self.assertEqual(sb.info.on_idle, "pause")
        with sb.events(from_seq=0, timeout=60) as stream:
            for ev in stream:
                if ev.kind in ("sandbox.paused", "sandbox.stopped", "sandbox.deleting"):
                    break
        self.assertEqual((ev.kind, ev.reason), ("sandbox.paused", "idle_timeout"))
        self.assertEqual(sb.refresh().state, "paused")
        self.assertEqual(sb.unpause().state, "ready")


if __name__ == "__main__":
    unittest.main()
