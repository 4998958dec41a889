"""Tests of Client.metrics: GET /metrics of a daemon of this module's own.

Like the daemon tests of test_sdk.py, they run against a real control daemon
and Docker Engine ($AIRLOCK_BINARY, $AIRLOCK_TEST_IMAGE; `go test ./sdk/python`
sets both) and are skipped without them.
"""

from __future__ import annotations

import os
import re
import unittest

import _bridge
from _bridge import Flavor, both_clients
from _daemon import Daemon

import airlock

IMAGE = os.environ.get("AIRLOCK_TEST_IMAGE", "")

_daemon: Daemon | None = None

# One sample line of the text format: name, labels, value.
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def setUpModule() -> None:
    global _daemon
    if os.environ.get("AIRLOCK_BINARY") and IMAGE:
        _daemon = Daemon()


def tearDownModule() -> None:
    _bridge.close()
    if _daemon is not None:
        _daemon.stop()


def parse(text: str) -> tuple[dict[str, str], dict[str, float]]:
    """The TYPE of each family and the value of each series (``name{labels}``) of the text format."""
    types: dict[str, str] = {}
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
        elif line.startswith("#") or not line:
            continue
        else:
            m = _SAMPLE.match(line)
            if m is None:
                raise AssertionError(f"not a sample line of the text format: {line!r}")
            values[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return types, values


@both_clients
class MetricsTest(Flavor, unittest.TestCase):
    """Client.metrics on the socket and on TCP with the token; a create and an exec move their series."""

    def setUp(self) -> None:
        if _daemon is None:
            raise unittest.SkipTest("needs AIRLOCK_BINARY and AIRLOCK_TEST_IMAGE (go test ./sdk/python sets them)")
        self.client = _daemon.client if self.flavor == "sync" else self.Client(_daemon.socket, timeout=60)

    def test_metrics(self) -> None:
        assert _daemon is not None
        text = self.client.metrics()
        self.assertIsInstance(text, str)
        types, before = parse(text)
        for name, typ in {"airlock_sandbox_create_seconds": "histogram", "airlock_sandbox_ready_seconds": "histogram",
                          "airlock_exec_start_seconds": "histogram", "airlock_sandboxes": "gauge",
                          "airlock_pool_claims_total": "counter", "airlock_pool_misses_total": "counter",
                          "airlock_event_store_bytes": "gauge", "process_open_fds": "gauge",
                          "process_resident_memory_bytes": "gauge"}.items():
            self.assertEqual(types.get(name), typ, name)
        cold = 'airlock_sandbox_create_seconds_count{launch="cold",backend="docker"}'
        execs = 'airlock_exec_start_seconds_count{backend="docker"}'
        ready = 'airlock_sandboxes{state="ready",backend="docker"}'

        manifest = f'[sandbox]\nimage = "{IMAGE}"\nnetwork = "none"\n'
        with self.client.create(manifest) as sb:
            self.assertEqual(sb.run("echo hi").stdout_text, "hi\n")
            _, during = parse(self.client.metrics())
            self.assertEqual(during[cold], before[cold] + 1)
            self.assertEqual(during[execs], before[execs] + 1)
            self.assertEqual(during[ready], before[ready] + 1)
            self.assertGreater(during['airlock_sandbox_create_seconds_sum{launch="cold",backend="docker"}'], 0)
        _, after = parse(self.client.metrics())
        self.assertEqual(after[ready], before[ready])
        self.assertGreater(after["airlock_events"], before["airlock_events"])

        # On TCP: with the token, the same text format; without, refused.
        _, tcp = parse(self.Client(_daemon.tcp, token=_daemon.token).metrics())
        self.assertEqual(tcp[cold], after[cold])
        with self.assertRaises(airlock.UnauthorizedError) as cm:
            self.Client(_daemon.tcp, token="wrong").metrics()
        self.assertEqual((cm.exception.status, cm.exception.reason), (401, "unauthorized"))
