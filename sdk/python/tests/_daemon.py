"""A control daemon of the tests' own: `airlock daemon run` as a hermetic user.

The binary is $AIRLOCK_BINARY; its HOME and XDG directories are under
$AIRLOCK_TEST_STATE_DIR when set (the Go wrapper sets it, to clean up after the
run), else a temporary directory removed at the end.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The package under test, not an installed one.
sys.path.insert(0, str(HERE.parent))

import airlock  # noqa: E402


class Daemon:
    """One `airlock daemon run` process and a client of its socket.

    With ``tls`` its TCP listener serves TLS, with a certificate for
    127.0.0.1 from a CA of its own (``ca``, made with openssl); its state is
    under ``tls/`` of the state directory.
    """

    def __init__(self, tls: bool = False) -> None:
        binary = os.environ.get("AIRLOCK_BINARY")
        if not binary:
            raise RuntimeError("AIRLOCK_BINARY must name an airlock binary (go test ./sdk/python builds one)")
        self.binary = binary
        root = os.environ.get("AIRLOCK_TEST_STATE_DIR")
        self._own_root = not root
        self.root = self._top = Path(root or tempfile.mkdtemp(prefix="airlock-sdk-"))
        if tls:
            self.root = self.root / "tls"
        self.env = dict(os.environ)
        for k in ("AIRLOCK_HOST", "AIRLOCK_TOKEN", "TMPDIR"):
            self.env.pop(k, None)
        for k, sub in (("HOME", "home"), ("XDG_RUNTIME_DIR", "run"), ("XDG_DATA_HOME", "data"),
                       ("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state")):
            d = self.root / sub
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.env[k] = str(d)
        self.env["NO_COLOR"] = "1"
        self.socket = airlock.default_socket(self.env)
        # Also on loopback TCP, with a token (given to the daemon in its environment).
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.tcp = f"tcp://127.0.0.1:{port}"
        self.token = secrets.token_hex(16)
        args = [binary, "daemon", "run", "--host", "127.0.0.1", "--port", str(port)]
        self.ca = ""
        if tls:
            self.ca, cert, key = _certificate(self.root / "tls-files")
            args += ["--tls-cert", cert, "--tls-key", key]
        self.log = open(self.root / "daemon.out", "wb")
        self.proc = subprocess.Popen(args,
                                     env=dict(self.env, AIRLOCK_TOKEN=self.token), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.client = airlock.Client(self.socket, timeout=60)
        self._wait_health()

    def _wait_health(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"airlock daemon run exited with {self.proc.returncode}:\n{self.output()}")
            try:
                self.client.health()
                return
            except airlock.DaemonUnreachableError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the daemon did not answer on {self.socket} within {timeout} s:\n{self.output()}")
                time.sleep(0.05)

    def output(self) -> str:
        """What the daemon printed."""
        self.log.flush()
        return (self.root / "daemon.out").read_text(errors="replace")

    def stop(self) -> None:
        """Stops the daemon (SIGTERM, then SIGKILL after 30 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if self._own_root:
            shutil.rmtree(self._top, ignore_errors=True)


def _certificate(d: Path) -> tuple[str, str, str]:
    """A CA and a certificate it signed for IP 127.0.0.1 (docs/daemon.md's openssl commands): ca, cert, key."""
    d.mkdir(parents=True, exist_ok=True, mode=0o700)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=airlock test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", *ec, "-subj", "/CN=127.0.0.1", "-keyout", "daemon.key", "-out", "daemon.csr")
    (d / "daemon.ext").write_text("subjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth\n")
    openssl("x509", "-req", "-in", "daemon.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "daemon.ext", "-out", "daemon.pem")
    return str(d / "ca.pem"), str(d / "daemon.pem"), str(d / "daemon.key")
