// What a client does without the daemon: the address rule (the shared table
// sdk/testdata/hosts.json), the checks of the default socket's directory, TLS
// off loopback, the errors of answers.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, chmodSync, symlinkSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHTTPServer, type Server } from "node:http";
import { createServer as createHTTPSServer } from "node:https";
import { createServer as createTCPServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { describe, test } from "node:test";
import {
  Client,
  DaemonUnreachableError,
  errorFromResponse,
  ExecResult,
  CommandFailedError,
  InvalidStateError,
  NotFoundError,
  SandboxNotFoundError,
  ServerError,
  UnsafeRuntimeDirError,
  resolveTarget,
  type Env,
} from "../src/index.js";
import { sdkSource } from "./helpers.js";

interface HostCase {
  address: string;
  env?: Record<string, string>;
  error?: boolean;
  error_contains?: string[];
  want?: { transport: string; path?: string; addr?: string; tls?: boolean; ca?: string; token?: string; argv?: string[] };
}

const testdata = join(sdkSource, "..", "testdata");

test("AIRLOCK_HOST resolves as sdk/testdata/hosts.json says (the table of the CLI and every SDK)", () => {
  const table = JSON.parse(readFileSync(join(testdata, "hosts.json"), "utf8")) as { cases: HostCase[] };
  assert.ok(table.cases.length > 10, `hosts.json has ${table.cases.length} cases`);
  const expand = (s: string): string => s.replaceAll("$TESTDATA", testdata);
  for (const c of table.cases) {
    const env: Record<string, string> = { AIRLOCK_HOST: c.address };
    for (const [k, v] of Object.entries(c.env ?? {})) env[k] = expand(v);
    const what = `${c.address} ${JSON.stringify(c.env ?? {})}`;
    if (c.error) {
      assert.throws(
        () => resolveTarget({}, env),
        (e: unknown) => {
          assert.ok(e instanceof TypeError, `${what}: ${String(e)}`);
          for (const w of c.error_contains ?? []) assert.ok(e.message.includes(w), `${what}: "${e.message}" does not say ${w}`);
          return true;
        },
        `${what}: accepted`,
      );
      assert.throws(() => new Client({ env }), TypeError, `${what}: a client was made`);
      continue;
    }
    const t = resolveTarget({}, env);
    const w = c.want!;
    assert.equal(t.transport, w.transport, what);
    if (t.transport === "unix") {
      assert.equal(t.path, w.path, what);
      assert.equal(t.checkRuntimeDir, false, `${what}: a socket named is taken as named`);
    } else if (t.transport === "ssh") {
      assert.deepEqual(t.argv, w.argv, what);
    } else {
      assert.equal(t.addr, w.addr, what);
      assert.equal(t.tls, w.tls ?? false, what);
      assert.equal(t.ca, expand(w.ca ?? ""), what);
      assert.equal(t.token ?? "", w.token ?? "", what);
      assert.ok(!new Client({ env }).address.includes("tok"), `${what}: the address shows the token`);
    }
  }
});

test("a client printed or serialised shows no token", () => {
  const c = new Client({ host: "tcp://127.0.0.1:7878", token: "sk-secret-token", env: {} });
  const sb = c.sandbox("x");
  for (const shown of [inspect(c, { depth: 9 }), JSON.stringify(c), inspect(sb, { depth: 9 }), JSON.stringify({ sb })]) {
    assert.ok(!shown.includes("sk-secret-token"), shown);
  }
  assert.equal(inspect(c), "Client <http://127.0.0.1:7878>");
});

test("options beat the environment; ssh's command line takes options", () => {
  const t = resolveTarget({ host: "tcp://127.0.0.1:7878", token: "mine", tlsCa: "/ca.pem" }, { AIRLOCK_TOKEN: "env" });
  assert.deepEqual([t.transport, t.transport === "tcp" && t.tls, t.transport === "tcp" && t.ca, t.transport === "tcp" && t.token], [
    "tcp",
    true,
    "/ca.pem",
    "mine",
  ]);
  const s = resolveTarget({ host: "ssh://bob@box:2222", sshOptions: ["-o", "BatchMode=yes"] }, {});
  assert.ok(s.transport === "ssh");
  assert.deepEqual(s.argv, ["ssh", "-T", "-o", "BatchMode=yes", "-l", "bob", "-p", "2222", "--", "box", "airlock", "daemon", "dial-stdio"]);
  const d = resolveTarget({}, { XDG_RUNTIME_DIR: "/run/user/7" });
  assert.deepEqual(d, { transport: "unix", path: "/run/user/7/airlock/airlockd.sock", checkRuntimeDir: true });
});

test("tcp:// off loopback speaks TLS first: a plain listener never sees the token", async () => {
  const token = `tok-${Math.random().toString(16).slice(2)}`;
  const got: Buffer[] = [];
  const srv = createTCPServer((sock) => {
    sock.on("data", (b: Buffer) => {
      got.push(b);
      sock.destroy();
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  try {
    // 0.0.0.0, which is not loopback, reaches the listener on 127.0.0.1.
    const c = new Client({ env: { AIRLOCK_HOST: `tcp://0.0.0.0:${port}`, AIRLOCK_TOKEN: token }, timeout: 10 });
    assert.ok(c.address.startsWith("https://"), c.address);
    await assert.rejects(c.health(), DaemonUnreachableError);
  } finally {
    srv.close();
  }
  const sent = Buffer.concat(got);
  assert.ok(sent.length > 0, "nothing was sent");
  assert.equal(sent[0], 0x16, "not a TLS handshake record");
  assert.ok(!sent.includes(token), "the token was sent");
});

test("TLS with a CA of its own (tlsCa): the token inside TLS; the system's CAs do not know it", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "airlock-ts-tls-"));
  try {
    const openssl = (...args: string[]): void => void execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
    try {
      openssl("version");
    } catch {
      t.skip("no openssl to make a certificate");
      return;
    }
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    openssl("req", "-x509", ...ec, "-days", "2", "-subj", "/CN=airlock test CA", "-keyout", "ca.key", "-out", "ca.pem");
    openssl("req", ...ec, "-subj", "/CN=127.0.0.1", "-keyout", "d.key", "-out", "d.csr");
    writeFileSync(join(dir, "d.ext"), "subjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth\n");
    openssl("x509", "-req", "-in", "d.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "d.ext", "-out", "d.pem");
    const auth: string[] = [];
    const srv = createHTTPSServer({ cert: readFileSync(join(dir, "d.pem")), key: readFileSync(join(dir, "d.key")) }, (req, res) => {
      auth.push(String(req.headers.authorization));
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ pid: 7, build_id: "tls", version: "", log_path: "" }));
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as { port: number }).port;
    try {
      const c = new Client({ host: `tcp://127.0.0.1:${port}`, token: "tok-tls", tlsCa: join(dir, "ca.pem"), env: {} });
      assert.equal(c.address, `https://127.0.0.1:${port}`, "a CA makes tcp:// TLS on loopback too");
      assert.equal((await c.health()).build_id, "tls");
      assert.deepEqual(auth, ["Bearer tok-tls"]);
      const viaEnv = new Client({ env: { AIRLOCK_HOST: `https://127.0.0.1:${port}`, AIRLOCK_TOKEN: "tok-env", AIRLOCK_TLS_CA: join(dir, "ca.pem") } });
      assert.equal((await viaEnv.health()).pid, 7);
      await assert.rejects(new Client({ host: `https://127.0.0.1:${port}`, token: "x", env: {} }).health(), DaemonUnreachableError);
      assert.deepEqual(auth, ["Bearer tok-tls", "Bearer tok-env"], "a certificate not trusted gets no request");
    } finally {
      srv.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A listener on a Unix socket that answers every request with a health JSON, counting connections. */
async function fakeDaemon(path: string): Promise<{ server: Server; connections: () => number }> {
  let n = 0;
  const server = createHTTPServer((req, res) => {
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({ pid: 4242, build_id: "fake", version: "fake", log_path: "" }));
  });
  server.on("connection", () => n++);
  await new Promise<void>((r) => server.listen(path, r));
  return { server, connections: () => n };
}

describe("the default socket's directory is checked as the CLI checks it", () => {
  const setup = (): { tmp: string; rt: string; env: Env; done: () => void } => {
    const tmp = mkdtempSync(join(tmpdir(), "airlock-ts-rt-"));
    chmodSync(tmp, 0o755);
    const rt = join(tmp, `airlock-${process.getuid!()}`);
    // The /tmp fallback, with TMPDIR standing for /tmp.
    return { tmp, rt, env: { TMPDIR: tmp }, done: () => rmSync(tmp, { recursive: true, force: true }) };
  };

  test("a private directory of the user's own is used", async () => {
    const s = setup();
    try {
      mkdirSync(s.rt, 0o700);
      const fake = await fakeDaemon(join(s.rt, "airlockd.sock"));
      try {
        const c = new Client({ env: s.env, timeout: 10 });
        assert.equal(c.address, join(s.rt, "airlockd.sock"));
        assert.equal((await c.health()).pid, 4242);
        assert.equal(fake.connections(), 1);
      } finally {
        fake.server.close();
      }
    } finally {
      s.done();
    }
  });

  test("no directory: unreachable", async () => {
    const s = setup();
    try {
      const e = await new Client({ env: s.env }).health().catch((x: unknown) => x);
      assert.ok(e instanceof DaemonUnreachableError && !(e instanceof UnsafeRuntimeDirError), String(e));
      assert.equal(e.reason, "unreachable");
      assert.equal(e.status, undefined);
    } finally {
      s.done();
    }
  });

  for (const [name, make, words] of [
    ["a directory others may enter", (rt: string) => mkdirSync(rt, 0o755), ["has mode 0755"]],
    [
      "a symbolic link",
      (rt: string) => {
        mkdirSync(`${rt}.real`, 0o700);
        symlinkSync(`${rt}.real`, rt);
      },
      ["symbolic link"],
    ],
  ] as const) {
    test(`${name} is refused, and nothing is sent`, async () => {
      const s = setup();
      try {
        make(s.rt);
        const fake = await fakeDaemon(join(s.rt, "airlockd.sock"));
        try {
          const c = new Client({ env: s.env, timeout: 10 });
          for (const call of [() => c.health(), () => c.create('[sandbox]\nimage = "x"\n', { vars: { API_KEY: "sk-secret" }, wait: false })]) {
            const e = await call().catch((x: unknown) => x);
            assert.ok(e instanceof UnsafeRuntimeDirError, String(e));
            assert.ok(e instanceof DaemonUnreachableError);
            assert.equal(e.reason, "unsafe_runtime_dir");
            assert.equal(e.path, s.rt);
            for (const w of [...words, s.rt, "XDG_RUNTIME_DIR"]) assert.ok(e.message.includes(w), `"${e.message}" does not say ${w}`);
          }
          assert.equal(fake.connections(), 0);
        } finally {
          fake.server.close();
        }
      } finally {
        s.done();
      }
    });
  }
});

test("an answer's reason picks the error's class; an unknown one its status", () => {
  const e = errorFromResponse(404, Buffer.from('{"reason":"sandbox_not_found","message":"no sandbox x"}'));
  assert.ok(e instanceof SandboxNotFoundError && e instanceof NotFoundError);
  assert.deepEqual([e.status, e.reason, e.message], [404, "sandbox_not_found", "no sandbox x"]);
  assert.ok(errorFromResponse(409, Buffer.from('{"reason":"invalid_state","message":"paused"}')) instanceof InvalidStateError);
  const u = errorFromResponse(404, Buffer.from('{"reason":"brand_new","message":"?"}'));
  assert.ok(u instanceof NotFoundError && u.reason === "brand_new");
  const p = errorFromResponse(502, Buffer.from("<html>bad gateway</html>"));
  assert.ok(p instanceof ServerError);
  assert.deepEqual([p.reason, p.message], ["internal", "<html>bad gateway</html>"]);
});

test("ExecResult: text, ok and check", () => {
  const r = new ExecResult({ exitCode: 3, stdout: Buffer.from("out"), stderr: Buffer.from("a\nb\nc\nd\n") });
  assert.equal(r.stdoutText, "out");
  assert.equal(r.ok, false);
  assert.throws(
    () => r.check(),
    (e: unknown) => e instanceof CommandFailedError && e.exitCode === 3 && e.message.endsWith("b | c | d"),
  );
  const ok = new ExecResult({ exitCode: 0, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) });
  assert.equal(ok.check(), ok);
});
