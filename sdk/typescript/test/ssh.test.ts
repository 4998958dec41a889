// ssh://: one `ssh … airlock daemon dial-stdio --mux` per client, every
// request a stream of it. A stand-in for ssh runs the dial-stdio locally, as
// the daemon's user, and counts its starts.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Client, DaemonUnreachableError, SandboxNotFoundError, type Event } from "../src/index.js";
import { daemon, manifest } from "./helpers.js";

describe("ssh", () => {
  let dir: string;
  let fake: string;
  let count: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "airlock-ts-ssh-"));
    fake = join(dir, "fake-ssh.mjs");
    count = join(dir, "starts");
    // ssh -T [options] -- HOST airlock daemon dial-stdio --mux: run what follows HOST, as the daemon's user.
    writeFileSync(
      fake,
      `import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
appendFileSync(${JSON.stringify(count)}, "x");
const args = process.argv.slice(2);
const remote = args.slice(args.indexOf("--") + 2);
if (remote[0] === "fail") { process.stderr.write("ssh: connect to host box port 22: Connection refused\\n"); process.exit(255); }
const env = Object.fromEntries(${JSON.stringify(daemon.env)}.map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
const [cmd, ...rest] = remote[0] === "airlock" ? [${JSON.stringify(daemon.binary)}, ...remote.slice(1)] : remote;
const p = spawn(cmd, rest, { stdio: "inherit", env });
p.on("exit", (code, sig) => process.exit(code ?? 1));
`,
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const sshClient = (remoteCommand?: string[]): Client =>
    new Client({ host: "ssh://me@box", sshCommand: [process.execPath, fake], env: {}, ...(remoteCommand ? { remoteCommand } : {}) });

  test("one ssh for health, errors, create, a streamed exec, a 300 KB output, events, files", async () => {
    const c = sshClient();
    try {
      assert.equal(c.address, "ssh://me@box");
      const h = await c.health();
      assert.ok(h.pid > 0);
      await assert.rejects(c.get("no-such-sandbox"), SandboxNotFoundError);
      const sb = await c.create(manifest(), { labels: { suite: "sdk-ts" } });
      try {
        const chunks: Buffer[] = [];
        const r = await sb.run("echo a; echo b >&2; exit 3", { onStdout: (b) => void chunks.push(b) });
        assert.deepEqual([r.exitCode, r.stdoutText, r.stderrText], [3, "a\n", "b\n"]);
        assert.equal(Buffer.concat(chunks).toString(), "a\n");
        const big = await sb.run("head -c 300000 /dev/zero");
        assert.equal(big.stdout.length, 300000);
        await sb.writeFile("/tmp/over-ssh", "mux");
        assert.equal(await sb.readText("/tmp/over-ssh"), "mux");
        const evs: Event[] = [];
        for await (const ev of sb.events({ follow: false })) evs.push(ev);
        assert.ok(evs.some((e) => e.kind === "exec.finished"));
        // Many at once, over the one connection.
        const many = await Promise.all(Array.from({ length: 8 }, (_, i) => sb.run(`echo ${i}`)));
        assert.deepEqual(many.map((x) => x.stdoutText), Array.from({ length: 8 }, (_, i) => `${i}\n`));
      } finally {
        await sb.delete();
      }
      assert.equal(readFileSync(count, "utf8"), "x", "one ssh for all the requests");
    } finally {
      c.close();
    }
  });

  test("ssh failing, an airlock without --mux: DaemonUnreachableError saying what ssh said", async () => {
    const e = await sshClient(["fail"]).health().catch((x: unknown) => x);
    assert.ok(e instanceof DaemonUnreachableError, String(e));
    assert.match(e.message, /Connection refused/);
    const old = join(dir, "old-airlock.sh");
    writeFileSync(old, "#!/bin/sh\necho 'Error: unknown flag: --mux' >&2\nexit 1\n", { mode: 0o755 });
    assert.ok(existsSync(old));
    const o = await sshClient([old, "daemon", "dial-stdio"]).health().catch((x: unknown) => x);
    assert.ok(o instanceof DaemonUnreachableError, String(o));
    assert.match(o.message, /older than this SDK/);
  });
});
