"""Tests of snapshots and forks in the SDK: Sandbox.snapshot, Client.snapshots,
Client.create(from_snapshot=…), Sandbox.fork, Client.delete_snapshot.

The daemon tests run against a control daemon of this module's own (as
test_sdk.py's) and the real Docker Engine; without AIRLOCK_BINARY and
AIRLOCK_TEST_IMAGE they are skipped.
"""

from __future__ import annotations

import os
import unittest
import uuid
from typing import Any

import _bridge
from _bridge import Flavor, both_clients
from _daemon import Daemon

import airlock
from airlock._snapshots import SnapshotInfo

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


class SnapshotUnitTest(unittest.TestCase):
    """What needs no daemon."""

    def test_from_json(self) -> None:
        snap = SnapshotInfo.from_json({"name": "n", "sandbox": "s", "created_at": "2026-01-01T00:00:00Z",
                                       "primary": {"image": "airlock-snapshot/n:primary", "id": "sha256:1", "size": 5},
                                       "services": [{"service": "db", "image": "airlock-snapshot/n:service-db", "id": "x"}]})
        self.assertEqual((snap.primary.image, snap.primary.size, snap.services[0].service), ("airlock-snapshot/n:primary", 5, "db"))
        self.assertIs(airlock.SnapshotInfo, SnapshotInfo)

    def test_create_needs_one_source(self) -> None:
        c = airlock.Client("/nonexistent/airlockd.sock")
        with self.assertRaises(TypeError):
            c.create()
        with self.assertRaises(TypeError):
            c.create("[sandbox]\nimage = \"x\"\n", from_snapshot="n")


@both_clients
class SnapshotTest(Flavor, unittest.TestCase):
    """Against the daemon: a snapshot, a sandbox from it, a fork whose copies are independent."""

    client: Any  # airlock.Client, or the asyncio client's view

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client if cls.flavor == "sync" else cls.Client(_daemon.socket, timeout=60)

    def quietly(self, f: Any) -> None:
        try:
            f()
        except airlock.AirlockError:
            pass

    def remove_snapshots_of(self, sandbox_id: str) -> None:
        for s in self.client.snapshots():
            if s.sandbox == sandbox_id:
                self.quietly(lambda: self.client.delete_snapshot(s.name))

    def test_snapshot_create_fork(self) -> None:
        sb = self.client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n')
        self.addCleanup(sb.delete)
        self.addCleanup(self.remove_snapshots_of, sb.id)
        sb.run("echo in-project > snapped.txt && echo in-tmp > /tmp/snapped.txt", check=True)
        name = f"sdk-{uuid.uuid4().hex[:12]}"
        snap = sb.snapshot(name)
        self.assertEqual((snap.name, snap.sandbox), (name, sb.id))
        self.assertIn(name, [s.name for s in self.client.snapshots()])
        with self.assertRaises(airlock.ConflictError):
            sb.snapshot(name)

        from_snap = self.client.create(from_snapshot=name)
        self.addCleanup(self.quietly, from_snap.delete)
        self.assertEqual(from_snap.run("cat snapped.txt /tmp/snapped.txt").stdout_text, "in-project\nin-tmp\n")
        with self.assertRaises(airlock.NotFoundError):
            self.client.create(from_snapshot="no-such-snapshot")

        copies = sb.fork(2)
        for c in copies:
            self.addCleanup(self.quietly, c.delete)
        self.assertEqual(len(copies), 2)
        self.assertEqual({c.info.state for c in copies}, {"ready"})
        copies[0].write_file("/tmp/own.txt", "first")
        self.assertEqual(copies[0].read_file("/tmp/own.txt"), b"first")
        for other in (copies[1], sb):
            with self.assertRaises(airlock.PathNotFoundError):
                other.read_file("/tmp/own.txt")
        self.assertEqual(copies[1].read_file("/tmp/snapped.txt"), b"in-tmp\n")
        with self.assertRaises(ValueError):
            sb.fork(0)

        # Deleted once no sandbox uses it; the fork's own snapshot too.
        with self.assertRaises(airlock.ConflictError):
            self.client.delete_snapshot(name)
        fork_snaps = [s.name for s in self.client.snapshots() if s.sandbox == sb.id and s.name.startswith("fork-")]
        self.assertEqual(len(fork_snaps), 1)
        for s in (from_snap, *copies):
            s.delete()
        for n in (name, fork_snaps[0]):
            self.assertEqual(self.client.delete_snapshot(n).name, n)
        self.assertFalse({name, fork_snaps[0]} & {s.name for s in self.client.snapshots()})
        with self.assertRaises(airlock.NotFoundError):
            self.client.delete_snapshot(name)

    def test_fork_whole_or_nothing(self) -> None:
        sb = self.client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n')
        self.addCleanup(sb.delete)
        self.addCleanup(self.remove_snapshots_of, sb.id)
        taken = self.client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n',
                                   id=f"sdk-taken-{uuid.uuid4().hex[:12]}")
        self.addCleanup(taken.delete)
        first = f"sdk-copy-{uuid.uuid4().hex[:12]}"
        # The second copy's ID is in use: the fork fails, and nothing of it stays.
        with self.assertRaises(airlock.IDAlreadyUsedError) as cm:
            sb.fork(ids=[first, taken.id])
        self.assertIn(taken.id, str(cm.exception))
        info = self.client.get(first)
        self.assertEqual((info.state, info.reason), ("deleted", "fork_failed"))
        self.assertEqual([s.name for s in self.client.snapshots() if s.sandbox == sb.id], [])
        with self.assertRaises(ValueError):
            sb.fork(3, ids=["a", "b"])
        # Free IDs: the copies have them.
        ok = f"sdk-copy-{uuid.uuid4().hex[:12]}"
        copies = sb.fork(ids=[ok])
        for c in copies:
            self.addCleanup(self.quietly, c.delete)
        self.assertEqual([c.id for c in copies], [ok])
        for c in copies:
            c.delete()
