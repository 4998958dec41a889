"""The measure of scripts/bench-sdk-pool.sh: SDK creates back to back, without and with a warm pool.

Each sample is the time from `client.create(...)` to the first byte of output of the first command
run in the sandbox (`echo`, streamed); the sandbox is then deleted, untimed, and the next create
follows at once. The daemon is one of its own (sdk/python/tests/_daemon.py), as the SDK's tests use.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "sdk" / "python" / "tests"))

from _daemon import Daemon  # noqa: E402  (it puts sdk/python first on the path)

MANIFEST = """
[sandbox]
image = "{image}"
network = "none"
{pool}
[env]
TOKEN = "${{TOKEN}}"
"""


def percentile(xs: list[float], p: float) -> float:
    """The nearest-rank percentile p (0–100) of xs."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def sample(client, manifest: str, project: str, i: int, tag: str) -> tuple[float, bool]:
    """One create and its first command's first output: seconds, and whether a parked sandbox served it."""
    t0 = time.perf_counter()
    sb = client.create(manifest, project_dir=project, vars={"TOKEN": f"token-{i}"}, id=f"bench-{tag}-{i}-{os.getpid()}",
                       labels={"bench": tag, "i": str(i)}, env={"N": str(i)})
    first = None
    with sb.exec_stream(["sh", "-c", 'echo "$N $TOKEN"']) as stream:
        out = b""
        for frame in stream:
            if frame.stream == "stdout":
                if first is None:
                    first = time.perf_counter() - t0
                out += frame.data
    if out.decode() != f"{i} token-{i}\n":
        raise SystemExit(f"sample {i}: the command printed {out!r}")
    warm = any(ev.kind == "pool.claimed" for ev in client.events(sb.id))
    sb.delete()
    assert first is not None
    return first, warm


def series(client, manifest: str, project: str, n: int, tag: str) -> tuple[list[float], int]:
    times, hits = [], 0
    for i in range(n):
        t, warm = sample(client, manifest, project, i, tag)
        times.append(t)
        hits += warm
    return times, hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=20, help="creates per series")
    ap.add_argument("--size", type=int, default=3, help="the pool's size")
    a = ap.parse_args()
    image = os.environ["AIRLOCK_TEST_IMAGE"]
    d = Daemon()
    project = tempfile.mkdtemp(prefix="airlock-bench-sdk-pool-")
    os.chmod(project, 0o755)
    try:
        c = d.client
        cold = MANIFEST.format(image=image, pool="")
        warm = MANIFEST.format(image=image, pool=f"\n[sandbox.pool]\nsize = {a.size}\n")
        sample(c, cold, project, 0, "prime")  # the image and the Engine's caches, untimed
        nopool, _ = series(c, cold, project, a.n, "nopool")
        c.warm_pool(warm, project_dir=project, vars={"TOKEN": "warm"})
        pooled, hits = series(c, warm, project, a.n, "pool")
        pool = next(p for p in c.pools().pools if p.project == project)
        c.drain_pools(all=True)
    finally:
        d.stop()
        shutil.rmtree(project, ignore_errors=True)
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    print(f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. By `scripts/bench-sdk-pool.sh` "
          f"against the Docker Engine on this machine, {os.cpu_count()} CPUs, Linux {platform.release()}; "
          f"image: the local busybox test image; {a.n} creates per series, back to back.")
    print()
    print("| measure | result | target |")
    print("|---|---|---|")
    print(f"| no pool: create → first output (p50; p95) | {ms(percentile(nopool, 50))}; {ms(percentile(nopool, 95))} | – |")
    print(f"| pool of {a.size}: create → first output (p50; p95) | {ms(percentile(pooled, 50))}; {ms(percentile(pooled, 95))} "
          f"| p50 ≤ 60 ms; p95 ≤ no pool's |")
    print(f"| pool of {a.size}: creates that got a parked sandbox | {hits} of {a.n} | – |")
    print(f"| pool of {a.size}: fastest / slowest | {ms(min(pooled))} / {ms(max(pooled))} | – |")
    print(f"| pool counters after the series: hits / misses | {pool.hits} / {dict(pool.misses)} | – |")
    print()
    print("samples (ms), no pool:", " ".join(f"{t * 1000:.0f}" for t in nopool))
    print("samples (ms), pool:   ", " ".join(f"{t * 1000:.0f}" for t in pooled))


if __name__ == "__main__":
    main()
