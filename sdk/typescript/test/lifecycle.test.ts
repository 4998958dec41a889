// A sandbox's life: its events (read again from any sequence, followed),
// pause and unpause, stop and resume, its lifetime, snapshots and forks.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { InvalidStateError, ConflictError, type Event } from "../src/index.js";
import { client, manifest, uid, withSandbox } from "./helpers.js";

describe("lifecycle", { concurrency: true }, () => {
  test("events: all, then from a sequence (resume), then followed live", async () => {
    await withSandbox(async (sb) => {
      const all: Event[] = [];
      for await (const ev of sb.events({ follow: false })) all.push(ev);
      assert.equal(all[0]?.kind, "sandbox.accepted");
      assert.ok(all.some((e) => e.kind === "sandbox.ready"));
      assert.deepEqual(all.map((e) => e.sequence), all.map((_, i) => i + 1), "sequences count from 1 without gaps");
      const mid = all[1]!.sequence;
      const rest: Event[] = [];
      for await (const ev of sb.events({ fromSeq: mid, follow: false })) rest.push(ev);
      assert.deepEqual(rest.map((e) => e.sequence), all.slice(2).map((e) => e.sequence));

      const last = (await sb.refresh()).last_seq;
      const live = sb.events({ fromSeq: last, timeout: 60 });
      await live.open(); // following before the exec: nothing is missed
      const run = sb.run("exit 4", { id: uid("ev") });
      let finished: Event | undefined;
      for await (const ev of live) {
        assert.ok(ev.sequence > last);
        if (ev.kind === "exec.finished") {
          finished = ev;
          break;
        }
      }
      assert.equal(finished?.exit_code, 4);
      assert.equal(finished?.exec_id, (await run).execId);
      assert.ok(live.lastSequence >= finished!.sequence);
    });
  });

  test("pause and unpause: frozen in place, files readable, execs refused until unpaused", async () => {
    await withSandbox(async (sb) => {
      const bg = await sb.run("i=0; while :; do i=$((i+1)); echo $i > /tmp/count; [ $i = 1 ] && echo started; sleep 0.05; done", {
        background: true,
      });
      for await (const chunk of bg.output("stdout", { follow: true })) if (chunk.includes("started")) break;
      assert.equal((await sb.pause()).state, "paused");
      try {
        const a = await sb.readText("/tmp/count");
        const e = await sb.run("true").catch((x: unknown) => x);
        assert.ok(e instanceof InvalidStateError, String(e));
        assert.match(e.message, /paused/);
        assert.equal(await sb.readText("/tmp/count"), a, "a paused sandbox runs nothing");
      } finally {
        assert.equal((await sb.unpause()).state, "ready");
      }
      assert.equal(await bg.running(), true, "the same process goes on");
      await bg.kill();
    });
  });

  test("stop and resume: files kept; lifetime and idle timeout set and cleared", async () => {
    await withSandbox(
      async (sb) => {
        assert.ok(sb.info?.expires_at, "a lifetime gives a deadline");
        assert.equal(sb.info?.on_timeout, "delete");
        await sb.writeFile("/tmp/kept", "yes");
        assert.equal((await sb.stop()).state, "stopped");
        assert.equal(await sb.readText("/tmp/kept"), "yes");
        assert.equal((await sb.resume()).state, "ready");
        assert.equal((await sb.run("cat /tmp/kept")).stdoutText, "yes");
        const t = await sb.setTimeout(120, { onTimeout: "stop" });
        assert.equal(t.on_timeout, "stop");
        assert.ok(t.expires_at);
        assert.ok(!(await sb.setTimeout(null)).expires_at);
        assert.equal((await sb.setIdleTimeout(600, { onIdle: "pause" })).idle_timeout, 600);
        await assert.rejects(sb.setTimeout(-1), RangeError);
      },
      { lifetime: 3600, noPool: true }, // a sandbox from a pool runs once: no resume
    );
  });

  test("snapshot, a sandbox made of it, a fork; a snapshot in use cannot be removed", async () => {
    const c = client();
    const name = uid("snap");
    await withSandbox(async (sb) => {
      await sb.writeFile("/tmp/state.txt", "from the original");
      const snap = await sb.snapshot(name);
      assert.deepEqual([snap.name, snap.sandbox], [name, sb.id]);
      assert.ok(snap.primary.image);
      assert.ok((await c.snapshots()).some((s) => s.name === name));
      // A sandbox of the snapshot and a fork, made at once.
      const [other, copies] = await Promise.all([c.create(null, { fromSnapshot: name, labels: { suite: "sdk-ts" } }), sb.fork(1)]);
      const [copy] = copies;
      try {
        assert.ok(copy && copy.id !== sb.id);
        assert.equal(await other.readText("/tmp/state.txt"), "from the original");
        await assert.rejects(c.deleteSnapshot(name), ConflictError);
        assert.equal(await copy.readText("/tmp/state.txt"), "from the original");
        await copy.writeFile("/tmp/state.txt", "changed");
        assert.equal(await sb.readText("/tmp/state.txt"), "from the original", "a fork shares nothing");
      } finally {
        await Promise.all([other.delete(), copy?.delete()]);
        await c.deleteSnapshot(copies.snapshot.name);
      }
    });
    await c.deleteSnapshot(name);
    assert.ok(!(await c.snapshots()).some((s) => s.name === name));
  });
});
