"""The measure of scripts/bench-snapshot.sh: snapshot, create from a snapshot, fork ×10.

Creates are timed from the call to the sandbox's readiness (``client.create`` waits for it); a
fork from the call to the last copy's readiness. The daemon is one of its own
(sdk/python/tests/_daemon.py), as the SDK's tests use.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "sdk" / "python" / "tests"))

from _daemon import Daemon  # noqa: E402  (it puts sdk/python first on the path)

MANIFEST = """
[sandbox]
image = "{image}"
network = "none"
"""

FILL = "mkdir -p /tmp/data && i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/urandom > /tmp/data/f$i; i=$((i+1)); done"


def timed(f):
    t0 = time.perf_counter()
    v = f()
    return time.perf_counter() - t0, v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=3, help="samples of each create and of the snapshot")
    ap.add_argument("--fork", type=int, default=10, help="copies of the fork")
    a = ap.parse_args()
    image = os.environ["AIRLOCK_TEST_IMAGE"]
    manifest = MANIFEST.format(image=image)
    d = Daemon()
    c = d.client
    made, snaps = [], []
    try:
        c.create(manifest).delete()  # the image and the Engine's caches, untimed
        cold = []
        for _ in range(a.n):
            t, sb = timed(lambda: c.create(manifest))
            cold.append(t)
            sb.delete()
        src = c.create(manifest)
        made.append(src)
        src.run(FILL, check=True)
        du = src.run("du -sk /tmp/data", check=True).stdout_text.split()[0]
        snap_t = []
        for i in range(a.n):
            name = f"bench-{uuid.uuid4().hex[:10]}"
            t, _ = timed(lambda: src.snapshot(name))
            snap_t.append(t)
            snaps.append(name)
        from_t = []
        for _ in range(a.n):
            t, sb = timed(lambda: c.create(from_snapshot=snaps[0]))
            from_t.append(t)
            if sb.run("ls /tmp/data | wc -l", check=True).stdout_text.strip() != "100":
                raise SystemExit("a sandbox from the snapshot lacks the files")
            sb.delete()
        fork_t, copies = timed(lambda: src.fork(a.fork))
        made.extend(copies)
        for i, cp in enumerate(copies):
            cp.write_file("/tmp/own", cp.id)
        independent = 0
        for i, cp in enumerate(copies):
            ok = cp.read_file("/tmp/own") == cp.id.encode()
            ok = ok and cp.run("ls /tmp/data | wc -l", check=True).stdout_text.strip() == "100"
            independent += ok
        if src.run("test -e /tmp/own").exit_code == 0:
            raise SystemExit("the original sees a copy's file")
        fork_snap = next(s.name for s in c.snapshots() if s.sandbox == src.id and s.name.startswith("fork-"))
        snaps.append(fork_snap)
    finally:
        for sb in made:
            try:
                sb.delete()
            except Exception as e:  # noqa: BLE001
                print("cannot delete", sb.id, e, file=sys.stderr)
        for n in snaps:
            try:
                c.delete_snapshot(n)
            except Exception as e:  # noqa: BLE001
                print("cannot delete snapshot", n, e, file=sys.stderr)
        d.stop()
    med = statistics.median
    s = lambda x: f"{x:.2f} s"  # noqa: E731
    print(f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. By `scripts/bench-snapshot.sh` "
          f"against the Docker Engine on this machine (shared with other work), {os.cpu_count()} CPUs, "
          f"Linux {platform.release()}; image: the local busybox test image; a sandbox with {int(du) // 1024} MiB "
          f"of changed files (100 files of random data); {a.n} samples each, the median shown.")
    print()
    print("| measure | result | target |")
    print("|---|---|---|")
    print(f"| cold create → ready | {s(med(cold))} | – |")
    print(f"| snapshot (pause, commit, resume) | {s(med(snap_t))} (max {s(max(snap_t))}) | ≤ 2 s |")
    print(f"| create from the snapshot → ready | {s(med(from_t))} = {med(from_t) / med(cold):.2f}× cold | ≤ 1.2× cold |")
    print(f"| fork ×{a.fork} → all ready | {s(fork_t)} | ≤ 5 s |")
    print(f"| copies independent (own file only, the 100 files, original untouched) | {independent} of {a.fork} | all |")
    print()
    print("samples (s): cold", " ".join(f"{x:.2f}" for x in cold), "| snapshot", " ".join(f"{x:.2f}" for x in snap_t),
          "| from snapshot", " ".join(f"{x:.2f}" for x in from_t))


if __name__ == "__main__":
    main()
