"""Tests of a sandbox's lifetime in the SDK: create(lifetime=…, idle_timeout=…), set_timeout, set_idle_timeout.

The daemon tests run against a control daemon of this module's own (as
test_sdk.py's) and the real Docker Engine; without AIRLOCK_BINARY and
AIRLOCK_TEST_IMAGE they are skipped.
"""

from __future__ import annotations

import datetime
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


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class LifetimeUnitTest(unittest.TestCase):
    """What needs no daemon."""

    def test_create_fields(self) -> None:
        self.assertEqual(create_fields(None, None, None, None), {})
        self.assertEqual(create_fields(90, "stop", datetime.timedelta(minutes=2), None),
                         {"timeout": 90.0, "on_timeout": "stop", "idle_timeout": 120.0})
        for args in ((-1, None, None, None), (None, None, 4e7, None), (60, "pause", None, None), (None, None, 5, "later")):
            with self.assertRaises(ValueError, msg=args):
                create_fields(*args)
        with self.assertRaises(TypeError):
            create_fields("10m", None, None, None)  # type: ignore[arg-type]

    def test_record(self) -> None:
        info = airlock.SandboxInfo.from_json({"id": "a", "state": "ready", "expires_at": "2026-01-01T00:00:00Z",
                                              "on_timeout": "stop", "idle_timeout": 90, "on_idle": "delete"})
        self.assertEqual((info.expires_at, info.on_timeout, info.idle_timeout, info.on_idle),
                         ("2026-01-01T00:00:00Z", "stop", 90.0, "delete"))
        bare = airlock.SandboxInfo.from_json({"id": "b", "state": "ready"})
        self.assertEqual((bare.expires_at, bare.on_timeout, bare.idle_timeout, bare.on_idle), ("", "", None, ""))


@both_clients
class LifetimeTest(Flavor, unittest.TestCase):
    """Against the daemon: a deadline set, extended, cleared and reached; an idle timeout reached."""

    client: Any  # airlock.Client, or the asyncio client's view

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client if cls.flavor == "sync" else cls.Client(_daemon.socket, timeout=60)

    def manifest(self) -> str:
        return f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n'

    def kinds_until(self, sb: Any, last: str, timeout: float = 60) -> list[airlock.Event]:
        """The sandbox's events up to the first of kind ``last``."""
        out = []
        with sb.events(from_seq=0, timeout=timeout) as stream:
            for ev in stream:
                out.append(ev)
                if ev.kind == last:
                    break
        return out

    def test_timeout(self) -> None:
        sb = self.client.create(self.manifest(), id=_uid("sdk-life"), lifetime=600, on_timeout="stop")
        self.addCleanup(sb.delete)
        self.assertEqual(sb.info.on_timeout, "stop")
        self.assertTrue(sb.info.expires_at)
        first = sb.info.expires_at

        # Extended: a later deadline, the policy kept.
        info = sb.set_timeout(datetime.timedelta(hours=2))
        self.assertGreater(info.expires_at, first)
        self.assertEqual(info.on_timeout, "stop")
        self.assertEqual(sb.refresh().expires_at, info.expires_at)
        # Cleared.
        info = sb.set_timeout(None)
        self.assertEqual((info.expires_at, info.on_timeout), ("", ""))
        # The daemon's own checks: a policy without a deadline.
        with self.assertRaises(airlock.InvalidRequestError) as cm:
            self.client._post_json(f"/v1/sandboxes/{sb.id}", {"on_timeout": "stop"}, method="PATCH")
        self.assertIn("on_timeout", cm.exception.message)
        with self.assertRaises(ValueError):
            sb.set_timeout(-5)

        # Reached: expired, then deleted.
        started = time.monotonic()
        info = sb.set_timeout(1.5, on_timeout="delete")
        self.assertEqual(info.on_timeout, "delete")
        evs = self.kinds_until(sb, "sandbox.deleted")
        self.assertLess(time.monotonic() - started, 30)
        kinds = [e.kind for e in evs]
        self.assertIn("sandbox.expired", kinds)
        expired = evs[kinds.index("sandbox.expired")]
        self.assertEqual((expired.reason, expired.raw.get("extra", {}).get("policy")), ("timeout", "delete"))
        self.assertLess(kinds.index("sandbox.expired"), kinds.index("sandbox.deleting"))
        self.assertEqual(evs[-1].reason, "timeout")
        self.assertEqual(self.client.get(sb.id).state, "deleted")

    def test_idle_timeout(self) -> None:
        sb = self.client.create(self.manifest(), id=_uid("sdk-idle"), idle_timeout=3600)
        self.addCleanup(sb.delete)
        self.assertEqual((sb.info.idle_timeout, sb.info.on_idle), (3600.0, "delete"))
        # Used, it is not idle; unused for its idle timeout, it stops.
        info = sb.set_idle_timeout(2, on_idle="stop")
        self.assertEqual((info.idle_timeout, info.on_idle), (2.0, "stop"))
        self.assertEqual(sb.run("echo busy").stdout_text, "busy\n")
        evs = self.kinds_until(sb, "sandbox.stopped")
        kinds = [e.kind for e in evs]
        expired = evs[kinds.index("sandbox.expired")]
        self.assertEqual((expired.reason, expired.raw.get("extra", {}).get("policy")), ("idle_timeout", "stop"))
        self.assertEqual(evs[-1].reason, "idle_timeout")
        self.assertEqual(sb.refresh().state, "stopped")


if __name__ == "__main__":
    unittest.main()
