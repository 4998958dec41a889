// Commands in one sandbox, run at once: exit codes, output streamed to
// callbacks and as frames, stdin, env, workdir, timeouts, background execs.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CommandFailedError, InvalidStateError, WaitTimeoutError, type Sandbox } from "../src/index.js";
import { client, manifest, uid } from "./helpers.js";

describe("exec", { concurrency: true }, () => {
  let sb: Sandbox;
  before(async () => {
    sb = await client().create(manifest(), { labels: { suite: "sdk-ts" }, env: { FROM_CREATE: "c", SHARED: "create" } });
  });
  after(async () => {
    await sb?.delete();
  });

  test("run: exit code, stdout and stderr; a string is run by sh -c; not found is 127", async () => {
    const r = await sb.run(["sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert.deepEqual([r.exitCode, r.stdoutText, r.stderrText, r.ok], [3, "out\n", "err\n", false]);
    assert.ok(r.execId);
    const s = await sb.run("echo $((6 * 7))");
    assert.equal(s.stdoutText, "42\n");
    assert.equal((await sb.run(["no-such-command"])).exitCode, 127);
    await assert.rejects(sb.run("exit 5", { check: true }), (e: unknown) => e instanceof CommandFailedError && e.exitCode === 5);
  });

  test("stdin, env (create's, the exec's over it), workdir, an exec ID", async () => {
    const id = uid("exec");
    const r = await sb.run(["sh", "-c", 'cat; echo "$FROM_CREATE $FROM_EXEC $SHARED"; pwd'], {
      stdin: "input\n",
      env: ["FROM_EXEC=e", "SHARED=exec"],
      workdir: "/tmp",
      id,
    });
    assert.equal(r.stdoutText, "input\nc e exec\n/tmp\n");
    assert.equal(r.execId, id);
    const bin = await sb.run("cat", { stdin: Buffer.from([0, 255, 1, 254]) });
    assert.deepEqual([...bin.stdout], [0, 255, 1, 254]);
  });

  test("onStdout and onStderr get each chunk as it comes; the result has all of it", async () => {
    const out: string[] = [];
    const err: string[] = [];
    const r = await sb.run("for i in 1 2 3; do echo o$i; echo e$i >&2; done", {
      onStdout: (b) => void out.push(b.toString()),
      onStderr: async (b) => void err.push(b.toString()),
    });
    assert.equal(out.join(""), "o1\no2\no3\n");
    assert.equal(err.join(""), "e1\ne2\ne3\n");
    assert.equal(r.stdoutText, "o1\no2\no3\n");
  });

  test("execStream: the record, output frames (bytes unchanged), the exit code", async () => {
    const stream = sb.execStream(["sh", "-c", "cat; printf '\\377\\n'; echo done >&2; exit 3"], { stdin: "in\n" });
    const frames = [];
    for await (const f of stream) frames.push(f);
    assert.ok(frames[0]?.exec?.id, "the first frame is the record");
    const out = Buffer.concat(frames.filter((f) => f.stream === "stdout").map((f) => f.data!));
    assert.deepEqual([...out], [...Buffer.from("in\n"), 0xff, 0x0a]);
    assert.equal(Buffer.concat(frames.filter((f) => f.stream === "stderr").map((f) => f.data!)).toString(), "done\n");
    assert.equal(frames.at(-1)?.exitCode, 3);
    assert.equal(stream.exitCode, 3);
    const r = await sb.execStream("echo a; echo b").result();
    assert.deepEqual([r.exitCode, r.stdoutText], [0, "a\nb\n"]);
  });

  test("a 300 KB output comes whole", async () => {
    const r = await sb.run("head -c 300000 /dev/zero | tr '\\0' x");
    assert.equal(r.stdout.length, 300000);
    assert.ok(r.stdout.every((b) => b === 0x78));
  });

  test("timeout: SIGTERM, then SIGKILL after killGrace; exit code 124, the record says timed_out", async () => {
    const id = uid("slow");
    const r = await sb.run(["sh", "-c", "trap '' TERM; echo started; sleep 30"], { timeout: 0.5, killGrace: 0.2, id });
    assert.equal(r.exitCode, 124);
    assert.equal(r.stdoutText, "started\n");
    const info = await sb.exec(id).info();
    assert.equal(info.timed_out, true);
    assert.throws(() => sb.execStream("true", { timeout: -1 }), RangeError);
  });

  test("background: the handle at once; output followed; signal; wait gives the result", async () => {
    const seen: string[] = [];
    const ex = await sb.run("echo ready; trap 'echo got-term; exit 7' TERM; while :; do sleep 0.05; done", {
      background: true,
      onStdout: (b) => void seen.push(b.toString()),
    });
    assert.ok(await ex.running());
    const out = ex.output("stdout", { follow: true });
    for await (const chunk of out) {
      if (chunk.toString().includes("ready")) break;
    }
    const running = await sb.execs({ running: true });
    assert.ok(running.some((e) => e.id === ex.id), "execs(running) lists it");
    await assert.rejects(ex.wait({ timeout: 0.2 }), WaitTimeoutError);
    await ex.signal("TERM");
    const r = await ex.wait({ timeout: 30 });
    assert.deepEqual([r.exitCode, r.stdoutText], [7, "ready\ngot-term\n"]);
    assert.equal(seen.join(""), "ready\ngot-term\n");
    assert.equal(await ex.running(), false);
    await assert.rejects(ex.kill(), InvalidStateError);
    const tail = [];
    for await (const c of ex.output("stdout", { start: 6 })) tail.push(c);
    assert.equal(Buffer.concat(tail).toString(), "got-term\n");
  });
});
