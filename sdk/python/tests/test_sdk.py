"""Tests of the airlock SDK.

The unit tests need nothing. The others run against a real control daemon
(started here from $AIRLOCK_BINARY, with XDG dirs of its own) and Docker Engine,
with the busybox test image $AIRLOCK_TEST_IMAGE: `go test ./sdk/python` sets
both and runs this module. Without them those tests are skipped.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import io
import json
import os
import re
import shutil
import socket
import tarfile
import tempfile
import threading
import unittest
import uuid
from pathlib import Path
from typing import Any

import _bridge
from _bridge import Flavor, both_clients
from _daemon import HERE, Daemon

import airlock
import airlock._ops
import airlock.aio
from airlock.errors import error_from_response

REPO = HERE.parent.parent.parent
IMAGE = os.environ.get("AIRLOCK_TEST_IMAGE", "")

_daemon: Daemon | None = None
_tls_daemon: Daemon | None = None  # started by the first TLSTest


def setUpModule() -> None:
    global _daemon
    if os.environ.get("AIRLOCK_BINARY") and IMAGE:
        _daemon = Daemon()


def tearDownModule() -> None:
    _bridge.close()
    for d in (_daemon, _tls_daemon):
        if d is not None:
            d.stop()


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class UnitTest(unittest.TestCase):
    """What needs no daemon."""

    def test_parse_host(self) -> None:
        self.assertEqual(airlock.parse_host("/run/a.sock"), airlock.Endpoint("unix", path="/run/a.sock"))
        self.assertEqual(airlock.parse_host("unix:///run/a.sock"), airlock.Endpoint("unix", path="/run/a.sock"))
        self.assertEqual(airlock.parse_host("tcp://127.0.0.1:7878", {}), airlock.Endpoint("tcp", host="127.0.0.1", port=7878))
        self.assertEqual(airlock.parse_host("https://box:7878"), airlock.Endpoint("tcp", host="box", port=7878, tls=True))
        self.assertEqual(airlock.parse_host("ssh://bob@box:2222"), airlock.Endpoint("ssh", host="box", user="bob", port=2222))
        self.assertEqual(airlock.parse_host("ssh://box"), airlock.Endpoint("ssh", host="box"))
        for bad in ("tcp://box", "ftp://box:1", "ssh://box/x", "box:7878"):
            with self.assertRaises(ValueError, msg=bad):
                airlock.parse_host(bad)


    def test_default_socket(self) -> None:
        self.assertEqual(airlock.default_socket({"XDG_RUNTIME_DIR": "/run/user/7"}, "linux"), "/run/user/7/airlock/airlockd.sock")
        uid = os.getuid()
        self.assertEqual(airlock.default_socket({}, "linux"), f"/tmp/airlock-{uid}/airlockd.sock")
        self.assertEqual(airlock.default_socket({"XDG_RUNTIME_DIR": "rel"}, "linux"), f"/tmp/airlock-{uid}/airlockd.sock")
        self.assertEqual(airlock.default_socket({"TMPDIR": "/var/tmp"}, "linux"), f"/var/tmp/airlock-{uid}/airlockd.sock")
        self.assertEqual(airlock.default_socket({"HOME": "/Users/a"}, "darwin"),
                         "/Users/a/Library/Application Support/airlock/run/airlockd.sock")

    def test_errors(self) -> None:
        e = error_from_response(404, b'{"reason":"sandbox_not_found","message":"no sandbox x"}')
        self.assertIsInstance(e, airlock.SandboxNotFoundError)
        self.assertIsInstance(e, airlock.NotFoundError)
        self.assertEqual((e.status, e.reason, e.message), (404, "sandbox_not_found", "no sandbox x"))
        e = error_from_response(409, b'{"reason":"some_new_reason","message":"m"}')
        self.assertIs(type(e), airlock.ConflictError)
        self.assertEqual(e.reason, "some_new_reason")
        e = error_from_response(502, b"<html>bad gateway</html>")
        self.assertIs(type(e), airlock.ServerError)
        self.assertEqual((e.status, e.reason, e.message), (502, "internal", "<html>bad gateway</html>"))
        self.assertIs(type(error_from_response(404, b"")), airlock.NotFoundError)

    def test_frames(self) -> None:
        f = airlock.ExecFrame.from_json({"stream": "stdout", "data_b64": base64.b64encode(b"\xff\n").decode()})
        self.assertEqual((f.stream, f.data), ("stdout", b"\xff\n"))
        f = airlock.ExecFrame.from_json({"stream": "stderr", "data": "é"})
        self.assertEqual(f.data, "é".encode())
        self.assertEqual(airlock.ExecFrame.from_json({"exit_code": 3}).exit_code, 3)

    def test_pool_models(self) -> None:
        doc = {"pools": [{"key": "k1", "project": "/p", "file": "/p/sandbox.toml", "engine": "unix:///d.sock", "size": 2,
                          "ready": 1, "starting": 1, "hits": 3, "misses": {"empty": 1}, "stale": 0, "failures": 0,
                          "idle_ttl": "15m0s", "last_used": "2026-01-01T00:00:00Z",
                          "sandboxes": [{"id": "a", "container": "c", "ready": True, "since": "2026-01-01T00:00:00Z"}]}],
               "pooled": 2, "pool_max": 8}
        pl = airlock.PoolList.from_json(doc)
        self.assertEqual((pl.pooled, pl.pool_max, len(pl.pools)), (2, 8, 1))
        p = pl.pools[0]
        self.assertEqual((p.key, p.size, p.ready, p.hits, p.misses, p.last_error), ("k1", 2, 1, 3, {"empty": 1}, ""))
        self.assertEqual(p.sandboxes, [airlock.PooledSandbox("a", "c", True, "2026-01-01T00:00:00Z")])
        self.assertEqual(airlock.PoolList.from_json({}).pools, [])



@both_clients
class ClientUnitTest(Flavor, unittest.TestCase):
    """What a client does without a daemon."""

    def test_ssh_command_line(self) -> None:
        c = self.Client("ssh://bob@box:2222", ssh_options=["-o", "BatchMode=yes"])
        self.assertEqual(c._t.ssh_argv(), ["ssh", "-T", "-o", "BatchMode=yes", "-l", "bob", "-p", "2222", "--", "box",
                                          "airlock", "daemon", "dial-stdio"])

    def test_unreachable(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            c = self.Client(os.path.join(d, "none.sock"))
            with self.assertRaises(airlock.DaemonUnreachableError) as cm:
                c.health()
            self.assertEqual(cm.exception.reason, "unreachable")
            self.assertIsNone(cm.exception.status)


TESTDATA = HERE.parent.parent / "testdata"


@both_clients
class HostsTableTest(Flavor, unittest.TestCase):
    """AIRLOCK_HOST resolves as sdk/testdata/hosts.json says: the table the CLI's test (cli.TestHostsTable) reads too.

    The transport, TLS (a tcp:// host off loopback is TLS, so the token never
    crosses the network in clear), the CA trusted, the token, ssh's command line.
    """

    def test_hosts_table(self) -> None:
        table = json.loads((TESTDATA / "hosts.json").read_text())
        cases = table["cases"]
        self.assertGreater(len(cases), 10)
        for c in cases:
            env: dict[str, str | None] = {k: None for k in ("AIRLOCK_HOST", "AIRLOCK_TOKEN", "AIRLOCK_TLS_CA")}
            env.update({k: v.replace("$TESTDATA", str(TESTDATA)) for k, v in (c.get("env") or {}).items()})
            env["AIRLOCK_HOST"] = c["address"]
            with self.subTest(address=c["address"], env=c.get("env")):
                with _patched_env(env):
                    if c.get("error"):
                        with self.assertRaises(ValueError) as cm:
                            self.Client()
                        for w in c.get("error_contains") or []:
                            self.assertIn(w, str(cm.exception))
                        continue
                    t = self.Client()._t
                w, ep = c["want"], t.endpoint
                self.assertEqual(ep.scheme, w["transport"])
                if ep.scheme == "unix":
                    self.assertEqual(ep.path, w["path"])
                elif ep.scheme == "ssh":
                    self.assertEqual(t.ssh_argv(), w["argv"])
                else:
                    host = f"[{ep.host}]" if ":" in ep.host else ep.host
                    self.assertEqual(f"{host}:{ep.port}", w["addr"])
                    self.assertEqual(ep.tls, w.get("tls", False))
                    self.assertEqual(t.tls_context is not None, w.get("tls", False))
                    if w.get("ca"):
                        assert t.tls_context is not None
                        ca = w["ca"].replace("$TESTDATA", str(TESTDATA))
                        self.assertEqual(ep.ca, ca)
                        self.assertEqual(len(t.tls_context.get_ca_certs()), 1)
                self.assertEqual(t.token or "", w.get("token", ""))


    def test_token_never_in_clear_off_loopback(self) -> None:
        """tcp:// to a host that is not loopback speaks TLS first: a plain listener there never sees the token."""
        token = "tok-" + uuid.uuid4().hex
        with socket.socket() as lsock:
            lsock.bind(("127.0.0.1", 0))  # 0.0.0.0, which is not loopback, reaches it
            lsock.listen(1)
            lsock.settimeout(10)
            got = bytearray()

            def serve() -> None:
                try:
                    conn, _ = lsock.accept()
                except OSError:
                    return
                with conn:
                    conn.settimeout(5)
                    try:
                        got.extend(conn.recv(65536))
                    except OSError:
                        pass

            th = threading.Thread(target=serve)
            th.start()
            with _patched_env({"AIRLOCK_HOST": f"tcp://0.0.0.0:{lsock.getsockname()[1]}", "AIRLOCK_TOKEN": token,
                               "AIRLOCK_TLS_CA": None}):
                c = self.Client(timeout=10)
            self.assertTrue(c.address.startswith("https://"), c.address)
            with self.assertRaises(airlock.DaemonUnreachableError):
                c.health()
            th.join()
        self.assertTrue(got, "nothing was sent")
        self.assertEqual(got[0], 0x16, f"not a TLS handshake: {bytes(got[:40])!r}")  # a TLS handshake record
        self.assertNotIn(token.encode(), got)


class _FakeDaemon:
    """A listener on a Unix socket that records what it is sent and answers every request with a health JSON."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.received = bytearray()
        self.connections = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                self.connections += 1
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length: *(\d+)", head)
                while m and len(body) < int(m.group(1)):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    body += chunk
                self.received += head + b"\r\n\r\n" + body
                answer = b'{"pid": 4242, "build_id": "fake"}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(answer) + answer)

    def close(self) -> None:
        self._sock.close()


@both_clients
class RuntimeDirTest(Flavor, unittest.TestCase):
    """The default socket is used only in a real directory of the user's own with mode 0700, as the CLI does.

    Another local user who made /tmp/airlock-<uid> first (or a link there, or
    a directory others may write into) would otherwise get the requests, the
    ``vars`` of a create (API keys) included.
    """

    OTHER_UID = 4243

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="airlock-sdk-rt-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        os.chmod(self.tmp, 0o755)
        self.rt = os.path.join(self.tmp, f"airlock-{os.getuid()}")
        self.sock = os.path.join(self.rt, "airlockd.sock")
        # The /tmp fallback, with TMPDIR standing for /tmp.
        self.env: dict[str, str | None] = {"AIRLOCK_HOST": None, "XDG_RUNTIME_DIR": None, "TMPDIR": self.tmp}

    def listen(self, path: str) -> _FakeDaemon:
        d = _FakeDaemon(path)
        self.addCleanup(d.close)
        return d

    def client(self) -> Any:
        with _patched_env(self.env):
            c = self.Client(timeout=10)
        self.assertEqual(c.address, self.sock)
        return c

    def assertRefused(self, fake: _FakeDaemon, *parts: str) -> None:
        c = self.client()
        with self.assertRaises(airlock.UnsafeRuntimeDirError) as cm:
            c.create('[sandbox]\nimage = "x"\n', vars={"API_KEY": "sk-very-secret-key"}, wait=False)
        e = cm.exception
        self.assertIsInstance(e, airlock.DaemonUnreachableError)
        self.assertEqual((e.status, e.reason), (None, "unsafe_runtime_dir"))
        for p in parts:
            self.assertIn(p, e.message)
        self.assertIn("XDG_RUNTIME_DIR", e.message)  # what to do
        with self.assertRaises(airlock.UnsafeRuntimeDirError):
            c.health()
        self.assertEqual((fake.connections, bytes(fake.received)), (0, b""))

    def test_own_private_dir(self) -> None:
        os.mkdir(self.rt, 0o700)
        fake = self.listen(self.sock)
        self.assertEqual(self.client().health().pid, 4242)
        self.assertEqual(fake.connections, 1)

    def test_no_dir(self) -> None:
        with self.assertRaises(airlock.DaemonUnreachableError) as cm:
            self.client().health()
        self.assertEqual(cm.exception.reason, "unreachable")

    def test_dir_of_another_user(self) -> None:
        if os.getuid() != 0:
            self.skipTest("needs root to make a directory of another user")
        os.mkdir(self.rt, 0o700)
        fake = self.listen(self.sock)
        os.chown(self.rt, self.OTHER_UID, self.OTHER_UID)
        self.assertRefused(fake, self.rt, f"belongs to uid {self.OTHER_UID}")

    def test_symlink(self) -> None:
        real = os.path.join(self.tmp, "elsewhere")
        os.mkdir(real, 0o700)
        fake = self.listen(os.path.join(real, "airlockd.sock"))
        os.symlink(real, self.rt)
        self.assertRefused(fake, self.rt, "symbolic link")

    def test_mode_open_to_others(self) -> None:
        os.mkdir(self.rt)
        os.chmod(self.rt, 0o755)
        fake = self.listen(self.sock)
        self.assertRefused(fake, self.rt, "mode 0755, not 0700")

    def test_not_a_directory(self) -> None:
        Path(self.rt).write_text("")
        with self.assertRaises(airlock.UnsafeRuntimeDirError) as cm:
            self.client().health()
        self.assertIn("not a directory", cm.exception.message)

    def test_socket_of_another_user(self) -> None:
        if os.getuid() != 0:
            self.skipTest("needs root to make a socket of another user")
        os.mkdir(self.rt, 0o700)
        fake = self.listen(self.sock)
        os.chown(self.sock, self.OTHER_UID, self.OTHER_UID)
        self.assertRefused(fake, self.sock, f"belongs to uid {self.OTHER_UID}")

    def test_xdg_runtime_dir(self) -> None:
        # $XDG_RUNTIME_DIR/airlock is held to the same rules.
        xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(xdg, 0o700)
        self.env["XDG_RUNTIME_DIR"] = xdg
        self.rt = os.path.join(xdg, "airlock")
        self.sock = os.path.join(self.rt, "airlockd.sock")
        os.mkdir(self.rt)
        os.chmod(self.rt, 0o750)
        fake = self.listen(self.sock)
        self.assertRefused(fake, self.rt, "mode 0750, not 0700")


class DaemonTest(Flavor, unittest.TestCase):
    """The base of the tests against the real daemon."""

    client: Any  # airlock.Client, or the asyncio client's view

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        cls.client = _daemon.client if cls.flavor == "sync" else cls.Client(_daemon.socket, timeout=60)

    def assertGone(self, sandbox_id: str) -> None:
        """The sandbox was deleted: its record stays (state deleted, the ID stays used), the list leaves it out.

        That nothing of it is left on the Engine, the Go wrapper checks.
        """
        self.assertEqual(self.client.get(sandbox_id).state, "deleted")
        self.assertNotIn(sandbox_id, [s.id for s in self.client.list()])
        with self.assertRaises(airlock.InvalidStateError) as cm:
            self.client.sandbox(sandbox_id).run("true")
        self.assertEqual((cm.exception.status, cm.exception.reason), (409, "invalid_state"))


@both_clients
class AgentFlowTest(DaemonTest):
    """An agent's session in one sandbox: everything the SDK does."""

    def test_agent_flow(self) -> None:
        manifest = f"""
[sandbox]
image = "{IMAGE}"
network = "none"

[env]
GREETING = "${{GREETING}}"
"""
        sid = _uid("sdk-flow")
        with self.client.create(manifest, vars={"GREETING": "hello from vars"}, id=sid,
                                labels={"suite": "sdk-python", "test": sid}, timeout=120) as sb:
            self.assertEqual(sb.id, sid)
            self.assertEqual(sb.info.state, "ready")
            self.assertEqual([s.id for s in self.client.list({"test": sid})], [sid])
            self.assertEqual(self.client.get(sid).labels["suite"], "sdk-python")

            # Write a script, run it, read what it wrote.
            script = '#!/bin/sh\nset -e\nmkdir -p /tmp/agent/out\necho "$GREETING, $1" > /tmp/agent/out/result.txt\necho done\n'
            sb.write_file("/tmp/agent/job.sh", script, mode=0o755)
            self.assertEqual(sb.read_text("/tmp/agent/job.sh"), script)
            r = sb.run(["/tmp/agent/job.sh", "world"])
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, b"done\n", b""))
            self.assertTrue(r.exec_id)
            self.assertEqual(sb.read_file("/tmp/agent/out/result.txt"), b"hello from vars, world\n")

            # A mode, env, workdir, a shell string.
            r = sb.run("pwd; echo $X", env={"X": "from env"}, workdir="/tmp/agent")
            self.assertEqual(r.stdout_text, "/tmp/agent\nfrom env\n")

            # Exit codes.
            r = sb.run(["sh", "-c", "echo failing >&2; exit 4"])
            self.assertEqual((r.exit_code, r.ok, r.stderr_text), (4, False, "failing\n"))
            with self.assertRaises(airlock.CommandFailedError) as cm:
                r.check()
            self.assertEqual((cm.exception.exit_code, cm.exception.result), (4, r))
            r = sb.run(["no-such-command"])
            self.assertEqual(r.exit_code, 127, r)
            self.assertIn("no-such-command", r.stderr_text)

            # A streamed exec with stdin and output that is not UTF-8.
            exec_id = _uid("sdk-exec")
            with sb.exec_stream(["sh", "-c", "cat; printf '\\377\\376\\n'; echo oops >&2; exit 3"],
                                stdin=b"line one\nline two\n", id=exec_id) as stream:
                frames = list(stream)
            first = frames[0].exec
            assert first is not None and stream.exec is not None
            self.assertEqual((first.id, first.sandbox_id, first.cmd[0]), (exec_id, sid, "sh"))
            self.assertEqual(stream.exec.id, exec_id)
            self.assertEqual(frames[-1].exit_code, 3)
            self.assertEqual(stream.exit_code, 3)
            out = b"".join(f.data for f in frames if f.stream == "stdout")
            err = b"".join(f.data for f in frames if f.stream == "stderr")
            self.assertEqual(out, b"line one\nline two\n\xff\xfe\n")
            self.assertEqual(err, b"oops\n")
            self.assertTrue(all(f.is_output for f in frames[1:-1]))

            # Binary files both ways, errors of files.
            blob = bytes(range(256)) * 64
            sb.write_file("/tmp/agent/blob.bin", blob)
            self.assertEqual(sb.read_file("/tmp/agent/blob.bin"), blob)
            with self.assertRaises(airlock.NotAFileError) as cm2:
                sb.read_file("/tmp/agent")
            self.assertEqual((cm2.exception.status, cm2.exception.reason), (406, "not_a_file"))
            with self.assertRaises(airlock.PathNotFoundError):
                sb.read_file("/tmp/agent/nothing")

            # A directory in, an archive out.
            with tempfile.TemporaryDirectory() as d:
                Path(d, "src").mkdir()
                Path(d, "src", "main.sh").write_text("echo from upload\n")
                Path(d, "README").write_text("read me\n")
                sb.upload_dir(d, "/tmp/project")
            self.assertEqual(sb.run(["sh", "/tmp/project/src/main.sh"]).stdout_text, "from upload\n")
            with tarfile.open(fileobj=io.BytesIO(sb.read_archive("/tmp/project")), mode="r") as tar:
                names = sorted(tar.getnames())
            self.assertEqual(names, ["project", "project/README", "project/src", "project/src/main.sh"])
            with tarfile.open(fileobj=io.BytesIO(sb.read_archive("/tmp/agent/job.sh")), mode="r") as tar:
                self.assertEqual(tar.getmember("job.sh").mode & 0o7777, 0o755)

            # The events: the history, then a live one.
            with sb.events(from_seq=0, follow=False) as evs:
                history = list(evs)
            kinds = [e.kind for e in history]
            self.assertEqual(history[0].kind, "sandbox.accepted")
            self.assertIn("sandbox.ready", kinds)
            self.assertEqual([e.sequence for e in history], list(range(1, len(history) + 1)))
            finished = [e for e in history if e.kind == "exec.finished" and e.exec_id == exec_id]
            self.assertEqual([e.exit_code for e in finished], [3])

            last = history[-1].sequence
            with sb.events(from_seq=last, follow=True, timeout=30) as live:
                live_id = _uid("sdk-live")
                threading.Thread(target=sb.run, args=(["true"],), kwargs={"id": live_id}, daemon=True).start()
                seen = []
                for ev in live:
                    seen.append(ev.kind)
                    if ev.kind == "exec.finished" and ev.exec_id == live_id:
                        self.assertEqual(ev.exit_code, 0)
                        break
            self.assertEqual(seen[-2:], ["exec.started", "exec.finished"], seen)

            # Stop: files stay readable; an exec is refused.
            stopped = sb.stop()
            self.assertEqual(stopped.state, "stopped")
            self.assertEqual(sb.read_file("/tmp/agent/out/result.txt"), b"hello from vars, world\n")
            with self.assertRaises(airlock.InvalidStateError) as cm3:
                sb.run("true")
            self.assertEqual((cm3.exception.status, cm3.exception.reason), (409, "invalid_state"))

            # Resume: ready again (its record says stopped until it started), its files as they were.
            resumed = sb.resume()
            self.assertEqual(resumed.state, "ready")
            self.assertEqual(sb.read_file("/tmp/agent/out/result.txt"), b"hello from vars, world\n")

        # The context manager deleted it.
        self.assertGone(sid)

    def test_errors(self) -> None:
        with self.assertRaises(airlock.SandboxNotFoundError) as cm:
            self.client.sandbox("no-such-sandbox").run(["true"])
        self.assertEqual((cm.exception.status, cm.exception.reason), (404, "sandbox_not_found"))
        self.assertIsInstance(cm.exception, airlock.AirlockError)
        self.assertTrue(cm.exception.message)

        with self.assertRaises(airlock.ConfigError) as cm2:
            self.client.create('[sandbox]\nimage = "x"\nno_such_key = 1\n')
        self.assertEqual((cm2.exception.status, cm2.exception.reason), (400, "config_error"))
        self.assertIn("no_such_key", cm2.exception.message)

        with self.assertRaises(airlock.InvalidIDError):
            self.client.create(f'[sandbox]\nimage = "{IMAGE}"\n', id="-x-")

        # A sandbox that fails while create waits: its reason, and it is deleted.
        sid = _uid("sdk-fail")
        with self.assertRaises(airlock.SandboxFailedError) as cm3:
            self.client.create('[sandbox]\nimage = "localhost:1/airlock-sdk/none:x"\nnetwork = "none"\n', id=sid, timeout=60)
        self.assertEqual((cm3.exception.reason, cm3.exception.state, cm3.exception.sandbox_id), ("sandbox_failed", "failed", sid))
        self.assertIn("localhost:1/airlock-sdk/none:x", cm3.exception.sandbox_reason)
        self.assertIn(self.client.get(sid).state, ("deleting", "deleted"))
        self.client.sandbox(sid).delete()


@both_clients
class TCPTest(DaemonTest):
    """The daemon's TCP listener, with its token."""

    def test_tcp_token(self) -> None:
        assert _daemon is not None
        h = self.Client(_daemon.tcp, token=_daemon.token).health()
        self.assertEqual(h.pid, _daemon.proc.pid)
        with self.assertRaises(airlock.UnauthorizedError) as cm:
            self.Client(_daemon.tcp, token="wrong").health()
        self.assertEqual((cm.exception.status, cm.exception.reason), (401, "unauthorized"))
        with _patched_env({"AIRLOCK_HOST": _daemon.tcp, "AIRLOCK_TOKEN": _daemon.token}):
            c = self.Client()
        self.assertEqual(c.address, _daemon.tcp.replace("tcp://", "http://"))
        with self.assertRaises(airlock.SandboxNotFoundError):
            c.get("no-such-sandbox")


@both_clients
class TLSTest(DaemonTest):
    """A daemon whose TCP listener serves TLS (a CA of the test's own): the token only inside TLS, streams too."""

    def test_tls(self) -> None:
        global _tls_daemon
        if shutil.which("openssl") is None:
            self.skipTest("no openssl to make the daemon's certificate")
        if _tls_daemon is None:
            _tls_daemon = Daemon(tls=True)
        d = _tls_daemon
        https = d.tcp.replace("tcp://", "https://")
        c = self.Client(https, token=d.token, tls_ca=d.ca, timeout=60)
        self.assertEqual(c.address, https)
        self.assertEqual(c.health().pid, d.proc.pid)
        # tcp:// with a CA is TLS too; the system's CAs do not know this one; a wrong token is refused.
        self.assertEqual(self.Client(d.tcp, token=d.token, tls_ca=d.ca).health().pid, d.proc.pid)
        with self.assertRaises(airlock.DaemonUnreachableError) as cm:
            self.Client(https, token=d.token, timeout=10).health()
        self.assertIn("CERTIFICATE_VERIFY_FAILED", cm.exception.message)
        with self.assertRaises(airlock.UnauthorizedError):
            self.Client(https, token="wrong", tls_ca=d.ca).health()
        with self.assertRaises(airlock.SandboxNotFoundError):
            c.get("no-such-sandbox")

        sid = _uid("sdk-tls")
        with c.create(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n', id=sid, timeout=120) as sb:
            with sb.exec_stream(["sh", "-c", "cat; echo e >&2; exit 6"], stdin=b"over tls\n") as stream:
                frames = list(stream)
            self.assertEqual(stream.exit_code, 6)
            self.assertEqual(b"".join(f.data for f in frames if f.stream == "stdout"), b"over tls\n")
            r = sb.run("head -c 300000 /dev/zero | tr '\\0' x")
            self.assertEqual((r.exit_code, len(r.stdout)), (0, 300000))
            with sb.events(from_seq=sb.refresh().last_seq, timeout=60) as events:
                sb.run("true")
                self.assertIn("exec.finished", [ev.kind for ev in _until(events, "exec.finished")])
        self.assertEqual(c.get(sid).state, "deleted")
        r2 = c.run(f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n', ["cat"], stdin="attached over tls\n")
        self.assertEqual((r2.exit_code, r2.stdout_text), (0, "attached over tls\n"))
        c.sandbox(r2.sandbox_id).delete()


def _until(events: Any, kind: str) -> list[Any]:
    """The events read until one of ``kind``."""
    seen = []
    for ev in events:
        seen.append(ev)
        if ev.kind == kind:
            break
    return seen


def _ssh_stand_in_client(make: Any, stderr: str = "", log: str = "") -> Any:
    """A client of the tests' daemon over ssh://, with a stand-in for ssh that runs the remote command here.

    The stand-in drops ssh's options and host and runs `airlock daemon
    dial-stdio` as the daemon's user, through pipes as ssh's are; what the
    remote command writes to stderr (what ssh shows the user) is appended to
    the file ``stderr`` when given. Each start of the stand-in adds a line to
    the file ``log`` when given.
    """
    assert _daemon is not None
    redirect = f' 2>>"{stderr}"' if stderr else ""
    count = f'echo started >>"{log}"; ' if log else ""
    fake_ssh = ["sh", "-c", count + 'while [ "$1" != -- ]; do shift; done; shift 2; exec "$@"' + redirect, "fake-ssh"]
    env = [f"{k}={_daemon.env[k]}" for k in ("HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")]
    return make("ssh://someone@remote-box:2222", ssh_command=fake_ssh,
                          remote_command=["env", *env, _daemon.binary, "daemon", "dial-stdio"])


@both_clients
class StdioTest(DaemonTest):
    """The ssh transport's pipe, with a stand-in for ssh that runs the remote command here.

    (No sshd: the stand-in drops ssh's options and host and runs `airlock daemon
    dial-stdio` as the daemon's user.)
    """

    def test_dial_stdio(self) -> None:
        assert _daemon is not None
        c = _ssh_stand_in_client(self.Client)
        self.addCleanup(c.close)
        self.assertEqual(c.health().pid, _daemon.proc.pid)
        with self.assertRaises(airlock.SandboxNotFoundError):
            c.sandbox("no-such-sandbox").run("true")
        self.assertIsInstance(c.list(), list)

    def test_one_ssh_per_client(self) -> None:
        """Every request and stream of a client goes through its one ssh, started on first use; close ends it."""
        log = tempfile.NamedTemporaryFile(prefix="airlock-ssh-log-", delete=False)
        log.close()
        self.addCleanup(os.unlink, log.name)
        c = _ssh_stand_in_client(self.Client, log=log.name)
        self.assertEqual(Path(log.name).read_text(), "")
        for _ in range(3):
            c.health()
        with self.assertRaises(airlock.SandboxNotFoundError):
            c.sandbox("no-such-sandbox").run("true")
        self.assertIsInstance(c.list(), list)
        self.assertEqual(c.health().pid, self.client.health().pid)
        self.assertEqual(Path(log.name).read_text(), "started\n")
        c.close()
        c.health()
        self.assertEqual(Path(log.name).read_text(), "started\n" * 2)
        c.close()

    def test_ssh_errors(self) -> None:
        """ssh that fails, an airlock there too old to multiplex, a connection that dies: what ssh said is in the error."""
        for script, want in (
            ("echo 'ssh: connect to host remote-box port 2222: Connection refused' >&2; exit 255", "Connection refused"),
            ("echo 'Error: unknown flag: --mux' >&2; exit 2", "older than this SDK"),
            ("echo 'airlock-mux 1 b linux amd64'; echo 'ssh: connection closed by remote host' >&2; exit 255",
             "connection closed by remote host"),
        ):
            c = self.Client("ssh://someone@remote-box:2222", ssh_command=["sh", "-c", script, "fake-ssh"])
            with self.assertRaises(airlock.DaemonUnreachableError) as cm:
                c.health()
            self.assertIn(want, str(cm.exception))
            c.close()

    def test_streams_over_ssh(self) -> None:
        """Every streamed answer over ssh: create (which follows the events), exec streams, run, events."""
        stderr = tempfile.NamedTemporaryFile(prefix="airlock-ssh-stderr-", delete=False)
        stderr.close()
        self.addCleanup(os.unlink, stderr.name)
        c = _ssh_stand_in_client(self.Client, stderr.name)
        self.addCleanup(c.close)
        manifest = f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n\n[env]\nWHO = "${{WHO}}"\n'
        sid = _uid("sdk-ssh")
        with c.create(manifest, vars={"WHO": "over ssh"}, id=sid, timeout=120) as sb:
            self.assertEqual(sb.info.state, "ready")
            with sb.exec_stream(["sh", "-c", "cat; echo $WHO; echo e >&2; exit 5"], stdin=b"in\n") as stream:
                frames = list(stream)
            self.assertEqual(stream.exit_code, 5)
            self.assertEqual(b"".join(f.data for f in frames if f.stream == "stdout"), b"in\nover ssh\n")
            self.assertEqual(b"".join(f.data for f in frames if f.stream == "stderr"), b"e\n")
            r = sb.run("echo big; head -c 300000 /dev/zero | tr '\\0' x")
            self.assertEqual((r.exit_code, len(r.stdout)), (0, 4 + 300000))
            kinds = [ev.kind for ev in sb.events(follow=False)]
            self.assertIn("sandbox.ready", kinds)
            self.assertIn("exec.finished", kinds)
            # A followed stream: the next exec's events arrive live.
            with sb.events(from_seq=sb.refresh().last_seq) as events:
                sb.run("true")
                for ev in events:
                    if ev.kind == "exec.finished":
                        break
        self.assertEqual(c.get(sid).state, "deleted")
        self.assertEqual(self.client.get(sid).state, "deleted")
        # Streams closed early (a wait that saw its event, a follow ended by
        # a break) are a client's normal end: the remote side says nothing.
        self.assertEqual(Path(stderr.name).read_text(), "")


@both_clients
class DictManifestTest(DaemonTest):
    """A manifest given as a dict, the context manager deleting after an exception."""

    def test_dict_manifest(self) -> None:
        doc = {"sandbox": {"image": IMAGE, "network": "none"}, "env": {"ANSWER": "${ANSWER}"}}
        sid = _uid("sdk-doc")
        with self.assertRaises(KeyError):
            with self.client.create(doc, vars={"ANSWER": "42"}, id=sid) as sb:
                self.assertEqual(sb.run("echo $ANSWER").stdout_text, "42\n")
                raise KeyError("the block failed")
        self.assertGone(sid)


@both_clients
class WarmPoolTest(DaemonTest):
    """A warm pool filled from a manifest text: a run of the same text takes its parked sandbox."""

    def test_warm_pool(self) -> None:
        manifest = f"""
[sandbox]
image = "{IMAGE}"
network = "none"

[env]
GREETING = "${{GREETING}}"
"""
        vars = {"GREETING": "hello from the pool"}
        project = tempfile.mkdtemp(prefix="airlock-sdk-pool-")
        self.addCleanup(shutil.rmtree, project, True)
        os.chmod(project, 0o755)
        Path(project, "note.txt").write_text("from the project\n")
        self.addCleanup(self.client.drain_pools, all=True)

        pool = self.client.warm_pool(manifest, project_dir=project, vars=vars, size=1)
        self.assertIsInstance(pool, airlock.Pool)
        self.assertEqual((pool.project, pool.size, pool.ready), (project, 1, 1))
        self.assertEqual(len(pool.sandboxes), 1)
        self.assertTrue(pool.sandboxes[0].ready)
        parked = pool.sandboxes[0].id
        listed = self.client.pools()
        self.assertIsInstance(listed, airlock.PoolList)
        self.assertGreaterEqual(listed.pool_max, 1)
        self.assertEqual([p.key for p in listed.pools if p.project == project], [pool.key])

        # A run of the same text, project and vars takes the parked sandbox.
        r = self.client.run(manifest, 'cat note.txt; echo "$GREETING"; echo to-stderr >&2; exit 3',
                            project_dir=project, vars=vars, keep=True)
        self.addCleanup(self.client.sandbox(r.sandbox_id).delete)
        self.assertEqual((r.exit_code, r.stdout_text, r.stderr_text),
                         (3, "from the project\nhello from the pool\n", "to-stderr\n"))
        self.assertEqual(r.sandbox_id, parked)
        kinds = [ev.kind for ev in self.client.events(r.sandbox_id)]
        self.assertIn("pool.claimed", kinds)

        # no_pool starts cold (stdin given, the sandbox removed once it exited).
        cold = self.client.run(manifest, ["cat"], project_dir=project, vars=vars, stdin="piped\n", no_pool=True)
        self.assertEqual((cold.exit_code, cold.stdout_text), (0, "piped\n"))
        self.assertNotEqual(cold.sandbox_id, parked)
        with self.client.events(cold.sandbox_id, follow=True, timeout=60) as stream:
            cold_kinds = []
            for ev in stream:
                cold_kinds.append(ev.kind)
                if ev.kind == "sandbox.deleted":
                    break
        self.assertNotIn("pool.claimed", cold_kinds)
        self.assertIn("pool.missed", cold_kinds)
        self.assertGone(cold.sandbox_id)

        mine = [p for p in self.client.pools().pools if p.project == project]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0].hits, 1, mine[0])
        self.assertGreaterEqual(mine[0].misses.get("disabled", 0), 1, mine[0])

        # Drained: nothing is parked.
        self.assertGreaterEqual(self.client.drain_pools(project=project), 0)
        after = self.client.pools()
        self.assertEqual(after.pooled, 0, after)
        self.assertTrue(all(p.ready == 0 and not p.sandboxes for p in after.pools), after)
        with self.assertRaises(ValueError):
            self.client.drain_pools()

        # Without a size, nor [sandbox.pool] in the manifest, there is nothing to warm.
        with self.assertRaises(airlock.ConfigError):
            self.client.warm_pool(manifest, project_dir=project, vars=vars)


@both_clients
class DocsExampleTest(DaemonTest):
    """docs/sdk.md's agent example, run as written (the image replaced by the test image); its asyncio twin
    (the block marked ``<!-- example async -->``) must print the same."""

    def test_docs_example(self) -> None:
        text = (REPO / "docs" / "sdk.md").read_text()
        m = re.search(r"<!-- example -->\s*```python\n(.*?)```\s*```text\n(.*?)```", text, re.S)
        self.assertIsNotNone(m, "docs/sdk.md has no <!-- example --> python block followed by a text block")
        assert m is not None
        code, want = m.group(1), m.group(2)
        if self.flavor == "async":
            a = re.search(r"<!-- example async -->\s*```python\n(.*?)```", text, re.S)
            self.assertIsNotNone(a, "docs/sdk.md has no <!-- example async --> python block")
            assert a is not None
            code = a.group(1)
            self.assertIn("airlock.aio.AsyncClient()", code)
        self.assertIn('"debian:12-slim"', code)
        code = code.replace('"debian:12-slim"', json.dumps(IMAGE))
        env = {"AIRLOCK_HOST": _daemon.socket if _daemon else ""}
        out = io.StringIO()
        with _patched_env(env), contextlib.redirect_stdout(out):
            exec(compile(code, "docs/sdk.md", "exec"), {"__name__": "__docs__"})
        self.assertEqual(out.getvalue(), want)


class AsyncNativeTest(unittest.IsolatedAsyncioTestCase):
    """airlock.aio as a program uses it: ``async with``, ``async for``, several commands and sandboxes at once,
    a cancelled create, a run over ssh."""

    @classmethod
    def setUpClass(cls) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")

    def manifest(self, extra: str = "") -> str:
        return f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n{extra}'

    async def assertGone(self, client: airlock.aio.AsyncClient, sandbox_id: str) -> None:
        self.assertEqual((await client.get(sandbox_id)).state, "deleted")
        self.assertNotIn(sandbox_id, [s.id for s in await client.list()])

    async def test_tasks_at_once(self) -> None:
        assert _daemon is not None
        sid = _uid("sdk-aio")
        async with airlock.aio.AsyncClient(_daemon.socket) as client, \
                await client.create(self.manifest(), id=sid, timeout=120) as sb:
            self.assertIsInstance(sb, airlock.aio.AsyncSandbox)
            self.assertEqual((sb.info.state, await sb.state), ("ready", "ready"))

            # Two commands at once: the first waits for a file the second makes (one after the other, it would not end).
            waiter = sb.run("i=0; until [ -e /tmp/go ]; do i=$((i+1)); [ $i -gt 60 ] && exit 9; sleep 1; done; echo released")
            maker = sb.run("sleep 1; touch /tmp/go; echo made")
            r1, r2 = await asyncio.gather(waiter, maker)
            self.assertEqual((r1.exit_code, r1.stdout_text, r2.stdout_text), (0, "released\n", "made\n"))

            # A stream opened by await, read with async for, closed.
            stream = await sb.exec_stream(["sh", "-c", "cat; echo oops >&2; exit 2"], stdin="in\n")
            frames = [f async for f in stream]
            await stream.close()
            self.assertIsNotNone(frames[0].exec)
            self.assertEqual((stream.exit_code, frames[-1].exit_code), (2, 2))
            self.assertEqual(b"".join(f.data for f in frames if f.stream == "stdout"), b"in\n")
            self.assertEqual(b"".join(f.data for f in frames if f.stream == "stderr"), b"oops\n")

            # Events followed while a command runs in another task.
            exec_id = _uid("sdk-aio-exec")
            async with sb.events(from_seq=(await sb.refresh()).last_seq, timeout=60) as events:
                task = asyncio.create_task(sb.run("true", id=exec_id))
                async for ev in events:
                    if ev.kind == "exec.finished" and ev.exec_id == exec_id:
                        break
                self.assertEqual((await task).exit_code, 0)
            self.assertGreater(events.last_sequence, 0)

            # Files, and two more sandboxes made at once.
            await sb.write_file("/tmp/f.txt", "text")
            self.assertEqual(await sb.read_text("/tmp/f.txt"), "text")
            ids = [_uid("sdk-aio-many") for _ in range(2)]
            many = await asyncio.gather(*(client.create(self.manifest(), id=i, timeout=120) for i in ids))
            for other in many:
                async with other:
                    self.assertEqual((await other.run("echo $((6 * 7))")).stdout_text, "42\n")
            for i in ids:
                await self.assertGone(client, i)
        await self.assertGone(client, sid)

    async def test_cancelled_create_deletes(self) -> None:
        """A task cancelled while create waits deletes the sandbox on its way out (as an error would)."""
        assert _daemon is not None
        client = airlock.aio.AsyncClient(_daemon.socket)
        sid = _uid("sdk-aio-cancel")
        slow = self.manifest('\n[daemons.setup]\noneshot = true\ncommand = ["sleep", "60"]\n')
        # Cancelled once create follows the sandbox's events (it waits for ready),
        # not merely once the sandbox exists: its POST may not have answered yet.
        following = asyncio.Event()
        perform = client._perform

        async def spied(op: Any, tasks: Any) -> object:
            res = await perform(op, tasks)
            if isinstance(op, airlock._ops.Follow):
                following.set()
            return res

        client._perform = spied  # type: ignore[method-assign]
        task = asyncio.create_task(client.create(slow, id=sid, timeout=120))
        await asyncio.wait_for(following.wait(), 60)
        self.assertFalse(task.done())
        self.assertNotEqual((await client.get(sid)).state, "ready")
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertIn((await client.get(sid)).state, ("deleting", "deleted"))
        await client.sandbox(sid).delete()
        await self.assertGone(client, sid)

    async def test_run_over_ssh(self) -> None:
        """Client.run over the ssh transport (an asyncio subprocess): created, attached, stdin sent by a task."""
        c = _ssh_stand_in_client(airlock.aio.AsyncClient)
        r = await c.run(self.manifest(), ["sh", "-c", "cat; echo to-stderr >&2; exit 4"], stdin="piped over ssh\n")
        self.assertEqual((r.exit_code, r.stdout_text, r.stderr_text), (4, "piped over ssh\n", "to-stderr\n"))
        await c.sandbox(r.sandbox_id).delete()  # removed on exit: wait until it is
        await self.assertGone(c, r.sandbox_id)
        await c.close()


class ParityTest(unittest.TestCase):
    """The asyncio client has the sync one's methods, with the same names and arguments."""

    PAIRS = [(airlock.Client, airlock.aio.AsyncClient), (airlock.Sandbox, airlock.aio.AsyncSandbox),
             (airlock.ExecStream, airlock.aio.AsyncExecStream), (airlock.EventStream, airlock.aio.AsyncEventStream),
             (airlock.Exec, airlock.aio.AsyncExec), (airlock.ExecOutput, airlock.aio.AsyncExecOutput),
             (airlock.Pty, airlock.aio.AsyncPty)]

    def test_same_methods(self) -> None:
        for sync, aio in self.PAIRS:
            with self.subTest(sync=sync.__name__):
                names = {n for n in dir(sync) if not n.startswith("_")}
                self.assertEqual(names - set(dir(aio)), set(), f"{aio.__name__} lacks these of {sync.__name__}")
                for n in sorted(names):
                    a, b = inspect.getattr_static(sync, n), inspect.getattr_static(aio, n)
                    if isinstance(a, property) or not callable(a):
                        self.assertEqual(isinstance(b, property), isinstance(a, property), n)
                        continue
                    sa, sb = inspect.signature(a), inspect.signature(b)
                    self.assertEqual([(p.name, p.kind, p.default) for p in sa.parameters.values()],
                                     [(p.name, p.kind, p.default) for p in sb.parameters.values()],
                                     f"{sync.__name__}.{n} and {aio.__name__}.{n} take different arguments")
                    # What does no I/O stays a plain method (a stream is opened when awaited or entered).
                    self.assertEqual(inspect.iscoroutinefunction(b), n not in ("sandbox", "events", "exec_stream", "output"),
                                     f"{aio.__name__}.{n}: awaited or not")
        self.assertIs(airlock.AsyncClient, airlock.aio.AsyncClient)


@contextlib.contextmanager
def _patched_env(env: dict[str, str | None]):
    """Sets the variables of env (None: unsets it) for the block."""
    old = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


if __name__ == "__main__":
    unittest.main()


class PoolCreateTest(DaemonTest):
    """create() takes a parked sandbox of its manifest's warm pool, with its own ID, labels, env and vars."""

    def test_create_from_pool(self) -> None:
        manifest = f"""
[sandbox]
image = "{IMAGE}"
network = "none"

[sandbox.pool]
size = 2

[env]
TOKEN = "${{TOKEN}}"
"""
        project = tempfile.mkdtemp(prefix="airlock-sdk-poolcreate-")
        self.addCleanup(shutil.rmtree, project, True)
        os.chmod(project, 0o755)
        self.addCleanup(self.client.drain_pools, project=project)
        pool = self.client.warm_pool(manifest, project_dir=project, vars={"TOKEN": "warm"})
        self.assertEqual(pool.ready, 2)
        parked = {s.id for s in pool.sandboxes}

        sid = _uid("sdk-pool")
        with self.client.create(manifest, project_dir=project, vars={"TOKEN": "claimed"}, id=sid,
                                labels={"who": "pool-test"}, env={"EXTRA": "x1"}) as sb:
            self.assertEqual(sb.id, sid)
            self.assertNotIn(sid, parked)
            self.assertEqual(sb.run("echo $TOKEN $EXTRA").stdout_text, "claimed x1\n")
            self.assertEqual(sb.info.labels.get("who"), "pool-test")
            self.assertEqual([s.id for s in self.client.list(labels={"who": "pool-test"})], [sid])
            kinds = [ev.kind for ev in self.client.events(sid)]
            self.assertIn("pool.claimed", kinds)
            self.assertNotIn("pool.missed", kinds)
        self.assertGone(sid)
        mine = [p for p in self.client.pools().pools if p.project == project]
        self.assertEqual(mine[0].hits, 1, mine[0])
