// The daemon over each transport of a local client: its socket (named, and the
// default one of XDG_RUNTIME_DIR), TCP with the token; records and errors.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Client, SandboxNotFoundError, UnauthorizedError, ConfigError, InvalidIDError } from "../src/index.js";
import { client, daemon, manifest, uid } from "./helpers.js";

describe("daemon", { concurrency: true }, () => {
  test("health over the Unix socket, named and by default (XDG_RUNTIME_DIR, its directory checked)", async () => {
    const h = await client().health();
    assert.ok(h.pid > 0 && h.build_id && h.version !== undefined);
    const byDefault = new Client({ env: { XDG_RUNTIME_DIR: daemon.runtimeDir } });
    assert.equal(byDefault.address, daemon.socket);
    assert.equal(byDefault.target.transport === "unix" && byDefault.target.checkRuntimeDir, true);
    assert.equal((await byDefault.health()).pid, h.pid);
    assert.match(await client().metrics(), /^# (HELP|TYPE) airlock_/m);
  });

  test("TCP with the token (AIRLOCK_TOKEN, or given); a wrong one is refused", async () => {
    const c = new Client({ env: { AIRLOCK_HOST: daemon.tcp, AIRLOCK_TOKEN: daemon.token } });
    assert.equal(c.address, daemon.tcp.replace("tcp://", "http://"));
    const h = await c.health();
    assert.equal(h.pid, (await client().health()).pid);
    const e = await new Client({ host: daemon.tcp, token: "wrong", env: {} }).health().catch((x: unknown) => x);
    assert.ok(e instanceof UnauthorizedError, String(e));
    assert.equal(e.status, 401);
    assert.ok(!e.message.includes(daemon.token));
    await assert.rejects(new Client({ host: daemon.tcp, env: {} }).health(), UnauthorizedError);
  });

  test("create, get, list by labels, delete: the record stays, deleted, out of the list", async () => {
    const c = new Client({ host: daemon.tcp, token: daemon.token, env: {} }); // TCP all the way, streams included
    const label = uid("label");
    const id = uid("sb");
    const sb = await c.create(manifest(), { id, labels: { suite: "sdk-ts", run: label } });
    try {
      assert.equal(sb.id, id);
      assert.equal(sb.info?.state, "ready");
      const info = await c.get(id);
      assert.deepEqual([info.id, info.kind, info.state, info.labels["run"]], [id, "up", "ready", label]);
      assert.ok(info.last_seq > 0);
      const listed = await c.list({ labels: { run: label } });
      assert.deepEqual(listed.map((s) => s.id), [id]);
      assert.deepEqual(await c.list({ labels: { run: `${label}-none` } }), []);
    } finally {
      await sb.delete();
    }
    assert.equal((await c.get(id)).state, "deleted");
    assert.deepEqual(await c.list({ labels: { run: label } }), []);
    await sb.delete(); // again: no error
  });

  test("errors name what went wrong: no such sandbox, a bad manifest, a bad ID", async () => {
    const c = client();
    const e = await c.sandbox("no-such-sandbox").run("true").catch((x: unknown) => x);
    assert.ok(e instanceof SandboxNotFoundError, String(e));
    assert.deepEqual([e.status, e.reason], [404, "sandbox_not_found"]);
    await assert.rejects(c.get("no-such-sandbox"), SandboxNotFoundError);
    await assert.rejects(c.create('[sandbox]\nimage = "x"\nbogus_key = 1\n'), ConfigError);
    await assert.rejects(c.create(manifest(), { id: "-bad id-" }), InvalidIDError);
    await assert.rejects(c.create(manifest(), { fromSnapshot: "x" }), TypeError);
  });
});
