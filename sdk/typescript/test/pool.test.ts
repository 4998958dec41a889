// Warm pools and one command in a sandbox of its own (Client.run).
import assert from "node:assert/strict";
import { mkdtempSync, chmodSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { type Event } from "../src/index.js";
import { client, manifest, uid } from "./helpers.js";

describe("pools and runs", { concurrency: true }, () => {
  test("a warm pool: filled, a create takes a parked sandbox (pool.claimed), drained", async () => {
    const c = client();
    // A project of its own: the pool's key is the manifest and the project dir.
    const project = mkdtempSync(join(tmpdir(), "airlock-ts-pool-"));
    chmodSync(project, 0o755);
    const m = manifest('[env]\nTOKEN = "${TOKEN}"\n');
    try {
      const pool = await c.warmPool(m, { size: 1, projectDir: project, vars: { TOKEN: "first" } });
      assert.equal(pool.ready, 1);
      assert.equal(pool.project, project);
      const id = uid("claimed");
      const sb = await c.create(m, { projectDir: project, vars: { TOKEN: "second" }, id, labels: { suite: "sdk-ts" } });
      try {
        const evs: Event[] = [];
        for await (const ev of sb.events({ follow: false })) evs.push(ev);
        assert.ok(evs.some((e) => e.kind === "pool.claimed"), evs.map((e) => e.kind).join(" "));
        assert.equal((await sb.run("echo $TOKEN")).stdoutText, "second\n", "the claim's vars, not the pool's");
        const listed = (await c.pools()).pools.find((p) => p.key === pool.key);
        assert.ok(listed && listed.hits >= 1);
      } finally {
        await sb.delete();
      }
      assert.ok((await c.drainPools({ project })) >= 0);
      assert.ok(!(await c.pools()).pools.some((p) => p.project === project && p.ready > 0));
    } finally {
      await c.drainPools({ project }).catch(() => 0);
      rmSync(project, { recursive: true, force: true });
    }
  });

  test("Client.run: one command in a sandbox of its own, stdin, removed after (or kept)", async () => {
    const c = client();
    const r = await c.run(manifest(), ["sh", "-c", "cat; echo err >&2; exit 2"], { stdin: "to stdin\n", labels: { suite: "sdk-ts" } });
    assert.deepEqual([r.exitCode, r.stdoutText, r.stderrText], [2, "to stdin\n", "err\n"]);
    assert.ok(r.sandboxId);
    const until = async (id: string, kind: string): Promise<void> => {
      for await (const ev of c.events(id, { timeout: 60 })) if (ev.kind === kind) return;
      assert.fail(`no ${kind} for sandbox ${id}`);
    };
    await until(r.sandboxId, "sandbox.deleted"); // removed once the command exited
    const kept = await c.run(manifest(), "echo kept", { keep: true, labels: { suite: "sdk-ts" } });
    try {
      assert.equal(kept.stdoutText, "kept\n");
      await until(kept.sandboxId, "sandbox.stopped");
      assert.equal((await c.get(kept.sandboxId)).state, "stopped");
    } finally {
      await c.sandbox(kept.sandboxId).delete();
    }
  });
});
