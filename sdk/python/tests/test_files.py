"""Tests of a sandbox's files beyond read and write: list_dir, stat, remove, mkdir, rename, download_dir, watch.

The daemon tests run against a control daemon of this module's own (as
test_sdk.py's) and the real Docker Engine; without AIRLOCK_BINARY and
AIRLOCK_TEST_IMAGE they are skipped.
"""

from __future__ import annotations

import os
import stat
import tarfile
import tempfile
import time
import unittest
import uuid
from typing import Any

import _bridge
from _bridge import Flavor, both_clients
from _daemon import Daemon

import airlock
from airlock._files import _query, _safe_member
from airlock._wire import Request

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


#: A name that is not UTF-8, as Python names it (os.fsdecode) and as its bytes.
BAD = os.fsdecode(b"b\xffad")


class FilesUnitTest(unittest.TestCase):
    """What needs no daemon."""

    def test_entry(self) -> None:
        e = airlock.FileEntry.from_json({"name": "b\ufffdad", "name_base64": "Yv9hZA==", "path": "/t/b\ufffdad",
                                         "path_base64": "L3QvYv9hZA==", "type": "file", "size": 3, "mode": "0640",
                                         "mtime": "2026-01-01T00:00:00Z", "uid": 65534, "gid": 65534})
        self.assertEqual((e.name, e.path, e.name_bytes, e.mode, e.size, e.is_file), (BAD, "/t/" + BAD, b"b\xffad", 0o640, 3, True))
        link = airlock.FileEntry.from_json({"name": "l", "path": "/l", "type": "symlink", "mode": "0777", "link_target": "n\nl"})
        self.assertEqual((link.is_symlink, link.link_target), (True, "n\nl"))
        ev = airlock.FileEvent.from_json({"type": "overflow", "reason": "rate: …", "dropped": 7})
        self.assertEqual((ev.type, ev.dropped), ("overflow", 7))

    def test_query(self) -> None:
        def target(*pairs: tuple[str, object]) -> str:
            return Request("GET", "/x", query=_query(*pairs)).target

        self.assertEqual(target(("path", "/t/" + BAD), ("depth", 2), ("recursive", True), ("limit", None), ("parents", False)),
                         "/x?path=%2Ft%2Fb%FFad&depth=2&recursive=true")
        self.assertEqual(target(("path", b"/a b"), ("to", "/n\nl")), "/x?path=%2Fa+b&to=%2Fn%0Al")
        # The read and write routes take such a name too.
        self.assertEqual(Request("GET", "/x", query={"path": "/t/" + BAD}).target, "/x?path=%2Ft%2Fb%FFad")

    def test_safe_member(self) -> None:
        dest = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, dest)

        def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
            m = tarfile.TarInfo(name)
            m.type, m.linkname = kind, link
            return m

        for ok in (member("a/b.txt"), member("l", tarfile.SYMTYPE, "a/b.txt"), member("a/l", tarfile.SYMTYPE, "../c")):
            self.assertTrue(_safe_member(ok, dest), ok.name)
        for bad in (member("/etc/x"), member("../x"), member("a/../../x"), member("l", tarfile.SYMTYPE, "/etc/passwd"),
                    member("a/l", tarfile.SYMTYPE, "../../x"), member("h", tarfile.LNKTYPE, "../x"),
                    member("dev", tarfile.CHRTYPE), member("p", tarfile.FIFOTYPE)):
            self.assertFalse(_safe_member(bad, dest), (bad.name, bad.linkname))


@both_clients
class FilesDaemonTest(Flavor, unittest.TestCase):
    """Against a daemon and the real Engine: one sandbox for every operation (through each client)."""

    client: Any
    sb: Any

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client if cls.flavor == "sync" else cls.Client(_daemon.socket, timeout=60)
        cls.sb = cls.client.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\nuser = "nobody"\n',
                                   id=f"sdk-files-{cls.flavor}-{uuid.uuid4().hex[:12]}")
        # A directory of the sandbox user's (written through the archive API).
        cls.sb.write_file("/tmp/sdk/.keep", "")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.delete()

    def sh(self, script: str) -> str:
        return self.sb.run(["sh", "-c", script], workdir="/", check=True).stdout_text

    def test_operations(self) -> None:
        sb = self.sb
        sb.mkdir("/tmp/sdk/f/a/b", parents=True)
        sb.mkdir("/tmp/sdk/f/a/b", parents=True)  # no error with parents
        with self.assertRaises(airlock.PathExistsError):
            sb.mkdir("/tmp/sdk/f/a")
        with self.assertRaises(airlock.PathNotFoundError):
            sb.mkdir("/tmp/none/x")
        sb.write_file("/tmp/sdk/f/hello.txt", "hello", mode=0o640)
        self.sh("cd /tmp/sdk/f && printf x > 'sp ace' && printf yy > \"$(printf 'n\\nl')\" && printf zzz > \"$(printf 'b\\377ad')\""
                " && ln -s hello.txt link")

        entries = sb.list_dir("/tmp/sdk/f")
        self.assertEqual([e.name for e in entries], ["a", BAD, "hello.txt", "link", "n\nl", "sp ace"])
        self.assertFalse(entries.truncated)  # type: ignore[attr-defined]
        by = {e.name: e for e in entries}
        self.assertEqual((by["hello.txt"].size, by["hello.txt"].mode, by["hello.txt"].uid), (5, 0o640, 65534))
        self.assertEqual((by["link"].type, by["link"].link_target), ("symlink", "hello.txt"))
        self.assertTrue(by["a"].is_dir)
        self.assertEqual([e.path for e in sb.list_dir("/tmp/sdk/f", depth=2)][:2], ["/tmp/sdk/f/a", "/tmp/sdk/f/a/b"])
        cut = sb.list_dir("/tmp/sdk/f", limit=2)
        self.assertEqual((len(cut), cut.truncated), (2, True))  # type: ignore[attr-defined]

        # A name read from a listing names its file when given back.
        bad = by[BAD]
        self.assertEqual(sb.stat(bad.path).size, 3)
        self.assertEqual(sb.stat(b"/tmp/sdk/f/b\xffad").name_bytes, b"b\xffad")
        self.assertTrue(sb.exists("/tmp/sdk/f/n\nl"))
        self.assertFalse(sb.exists("/tmp/sdk/f/missing"))
        with self.assertRaises(airlock.PathNotFoundError):
            sb.stat("/tmp/sdk/f/missing")
        with self.assertRaises(airlock.ConflictError) as cm:
            sb.list_dir("/tmp/sdk/f/hello.txt")
        self.assertEqual(cm.exception.reason, "not_a_directory")
        with self.assertRaises(airlock.InvalidRequestError):
            sb.stat("relative/path")

        with self.assertRaises(airlock.PathExistsError):
            sb.rename("/tmp/sdk/f/sp ace", "/tmp/sdk/f/n\nl")
        sb.rename("/tmp/sdk/f/sp ace", "/tmp/sdk/f/n\nl", overwrite=True)
        self.assertEqual(sb.read_file("/tmp/sdk/f/n\nl"), b"x")
        sb.rename(bad.path, "/tmp/sdk/f/a/good")
        self.assertEqual(sb.read_file("/tmp/sdk/f/a/good"), b"zzz")

        with self.assertRaises(airlock.DirectoryNotEmptyError):
            sb.remove("/tmp/sdk/f/a")
        sb.remove("/tmp/sdk/f/a", recursive=True)
        sb.remove("/tmp/sdk/f/link")
        self.assertEqual([e.name for e in sb.list_dir("/tmp/sdk/f")], ["hello.txt", "n\nl"])
        with self.assertRaises(airlock.PathNotFoundError):
            sb.remove("/tmp/sdk/f/a", recursive=True)
        with self.assertRaises(airlock.PermissionDeniedError):
            sb.remove("/etc/group")

    def test_download_dir(self) -> None:
        sb = self.sb
        self.sh("mkdir -p /tmp/sdk/d/site/css && echo '<h1/>' > /tmp/sdk/d/site/index.html && echo 'p {}' > /tmp/sdk/d/site/css/main.css"
                " && chmod 600 /tmp/sdk/d/site/css/main.css && ln -s index.html /tmp/sdk/d/site/home")
        dest = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(dest))
        sb.download_dir("/tmp/sdk/d/site", os.path.join(dest, "out"))
        out = os.path.join(dest, "out")
        self.assertEqual(sorted(os.listdir(out)), ["css", "home", "index.html"])
        with open(os.path.join(out, "css", "main.css")) as f:
            self.assertEqual(f.read(), "p {}\n")
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(out, "css", "main.css")).st_mode), 0o600)
        self.assertEqual(os.readlink(os.path.join(out, "home")), "index.html")

        # A link out of the directory is refused, and nothing is written through it.
        self.sh("mkdir -p /tmp/sdk/d/evil && ln -s / /tmp/sdk/d/evil/root && echo x > /tmp/sdk/d/evil/z")
        with self.assertRaises(airlock.ProtocolError):
            sb.download_dir("/tmp/sdk/d/evil", os.path.join(dest, "evil"))
        self.assertFalse(os.path.lexists(os.path.join(dest, "evil", "root")))
        with self.assertRaises(airlock.ConflictError):
            sb.download_dir("/tmp/sdk/d/site/index.html", os.path.join(dest, "file"))
        with self.assertRaises(airlock.PathNotFoundError):
            sb.download_dir("/tmp/sdk/d/none", os.path.join(dest, "none"))

    def test_watch(self) -> None:
        sb = self.sb
        sb.mkdir("/tmp/sdk/w/old", parents=True)
        with sb.watch("/tmp/sdk/w", recursive=True, timeout=20) as w:
            self.assertEqual(w.watched, 2)
            self.sh("cd /tmp/sdk/w && echo a > f1 && echo b > f2 && echo c >> f1 && rm f2 && mkdir d && echo x > d/g && rmdir old")
            got: list[tuple[str, str, bool]] = []
            for ev in w:
                if not got or got[-1] != (ev.type, ev.path, ev.dir):
                    got.append((ev.type, ev.path, ev.dir))
                if len(got) == 7:
                    break
        self.assertEqual(got, [("created", "/tmp/sdk/w/f1", False), ("created", "/tmp/sdk/w/f2", False),
                               ("modified", "/tmp/sdk/w/f1", False), ("removed", "/tmp/sdk/w/f2", False),
                               ("created", "/tmp/sdk/w/d", True), ("created", "/tmp/sdk/w/d/g", False),
                               ("removed", "/tmp/sdk/w/old", True)])

        # The bound of events a second.
        sb.mkdir("/tmp/sdk/r")
        with sb.watch("/tmp/sdk/r", rate=5, timeout=20) as w:
            self.sh("cd /tmp/sdk/r && for i in $(seq 30); do : > f$i; done")
            n = 0
            for ev in w:
                if ev.type == "overflow":
                    self.assertIn("rate", ev.reason)
                    self.assertGreater(ev.dropped, 0)
                    break
                n += 1
            self.assertLessEqual(n, 5)

        # The watch ends with its directory.
        sb.mkdir("/tmp/sdk/gone")
        with sb.watch("/tmp/sdk/gone", timeout=20) as w:
            sb.remove("/tmp/sdk/gone")
            self.assertEqual([(e.type, e.path) for e in w], [("removed", "/tmp/sdk/gone")])

        with self.assertRaises(airlock.PathNotFoundError):
            sb.watch("/tmp/sdk/none")

        # Nothing is left running in the sandbox once the watches are closed.
        deadline = time.monotonic() + 10
        while True:
            ps = self.sh("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done")
            left = [line for line in ps.splitlines() if "fs watch" in line]
            if not left:
                break
            if time.monotonic() > deadline:
                self.fail(f"watchers left in the sandbox: {left}")
            time.sleep(0.2)

    def _watch_when_free(self, path: str) -> Any:
        """A watch of path, waiting (10 s at most) for a place while the sandbox has 8 open."""
        deadline = time.monotonic() + 10
        while True:
            try:
                w = self.sb.watch(path, timeout=20)
                return w
            except airlock.TooManyWatchesError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def test_watch_cap(self) -> None:
        sb = self.sb
        sb.mkdir("/tmp/sdk/cap", parents=True)
        open_: list[Any] = []
        try:
            for _ in range(8):
                open_.append(self._watch_when_free("/tmp/sdk/cap"))
            with self.assertRaises(airlock.TooManyWatchesError) as cm:
                sb.watch("/tmp/sdk/cap")
            self.assertEqual(cm.exception.status, 429)
            self.assertIn("8", str(cm.exception))
            open_.pop(0).close()  # its place comes free
            open_.append(self._watch_when_free("/tmp/sdk/cap"))
        finally:
            for w in open_:
                w.close()






class FilesParityTest(unittest.TestCase):
    """The asyncio client's files methods are the sync one's, awaited."""

    def test_same(self) -> None:
        import inspect

        import airlock.aio
        names = ["list_dir", "stat", "exists", "remove", "mkdir", "rename", "download_dir", "watch"]
        for n in names:
            sync, aio = getattr(airlock.Sandbox, n), getattr(airlock.aio.AsyncSandbox, n)
            self.assertEqual(inspect.signature(sync).parameters.keys(), inspect.signature(aio).parameters.keys(), n)
            self.assertTrue(inspect.iscoroutinefunction(aio), n)
        self.assertTrue(inspect.iscoroutinefunction(airlock.AsyncFileWatch.close))


if __name__ == "__main__":
    unittest.main()
