// The client of an airlock daemon and the handles it gives: Client, Sandbox,
// Exec. Every call goes through the daemon's API (docs/api.md).
import { readFileSync } from "node:fs";
import type { Duplex } from "node:stream";
import { resolveTarget, type AddressOptions, type Env, type Target } from "./address.js";
import type * as api from "./api.js";
import {
  AirlockError,
  EngineError,
  ProtocolError,
  SandboxFailedError,
  SandboxNotFoundError,
  WaitTimeoutError,
} from "./errors.js";
import {
  ExecResult,
  type Command,
  type EnvVars,
  type ExecInfo,
  type FileEntry,
  type Health,
  type Manifest,
  type Pool,
  type PoolList,
  type PruneResult,
  type SandboxInfo,
  type SnapshotInfo,
} from "./models.js";
import { EventStream, ExecOutput, ExecStream } from "./streams.js";
import { readAll, Transport, type Request } from "./transport.js";

/** The options of a Client. */
export interface ClientOptions extends AddressOptions {
  /** Seconds that bound connecting and each read of an ordinary answer (streams are read without it); 60 by default, 0 for none. */
  timeout?: number;
  /** The environment the address rule reads (AIRLOCK_HOST, AIRLOCK_TOKEN, AIRLOCK_TLS_CA, XDG_RUNTIME_DIR…); process.env by default. */
  env?: Env;
}

/** What create takes beside the manifest. */
export interface CreateOptions {
  /** A directory on the daemon's host: the sandbox's project (else an empty one of its own). */
  projectDir?: string;
  /** The values of the manifest's ${NAME}s (the daemon never reads its own environment for them). */
  vars?: Record<string, string>;
  /** The sandbox's ID (IDs are reserved forever). */
  id?: string;
  labels?: Record<string, string>;
  /** Variables over the manifest's [env], for every command run in the sandbox. */
  env?: EnvVars;
  /** Start cold even when a warm pool has a sandbox parked. */
  noPool?: boolean;
  /** Start it (default true); false leaves it created, stopped. */
  start?: boolean;
  /** Wait until it is ready (default true). */
  wait?: boolean;
  /** Seconds to wait for ready (default 300). */
  timeout?: number;
  /** Keep a sandbox that failed to get ready (else it is deleted). */
  keepOnFailure?: boolean;
  /** Seconds after which the daemon deletes it (or stops it: onTimeout "stop"). */
  lifetime?: number;
  onTimeout?: "delete" | "stop";
  /** Seconds unused after which the daemon deletes (or stops, or pauses) it. */
  idleTimeout?: number;
  onIdle?: "delete" | "stop" | "pause";
  /** Make it of a snapshot instead of a manifest (give null as the manifest). */
  fromSnapshot?: string;
}

/** What Client.run takes beside the manifest and the command. */
export interface ClientRunOptions {
  projectDir?: string;
  vars?: Record<string, string>;
  /** The command's whole standard input (else /dev/null). */
  stdin?: Buffer | string;
  env?: EnvVars;
  workdir?: string;
  id?: string;
  labels?: Record<string, string>;
  noPool?: boolean;
  /** Keep the sandbox, stopped, once the command exited (else it is removed). */
  keep?: boolean;
  /** Throw CommandFailedError on a non-zero exit code. */
  check?: boolean;
  /** Seconds the making of the sandbox may take (not the command); 300 by default. */
  timeout?: number;
}

/** What Sandbox.run and Sandbox.execStream take. */
export interface ExecOptions {
  /** The command's whole standard input (empty without it). */
  stdin?: Buffer | string;
  /** Variables added to the manifest's [env]. */
  env?: EnvVars;
  workdir?: string;
  /** The exec's ID (reserved forever). */
  id?: string;
  /** Seconds the command may run: then SIGTERM, SIGKILL after killGrace, exit code 124. */
  timeout?: number;
  /** Seconds between SIGTERM and SIGKILL (5 by default). */
  killGrace?: number;
}

/** What Sandbox.run takes. */
export interface RunOptions extends ExecOptions {
  /** Throw CommandFailedError on a non-zero exit code. */
  check?: boolean;
  /** Called with each chunk of stdout as it comes (the result still has all of it). */
  onStdout?: (chunk: Buffer) => void | Promise<void>;
  /** Called with each chunk of stderr as it comes. */
  onStderr?: (chunk: Buffer) => void | Promise<void>;
  /** Start it and return its Exec handle at once. */
  background?: boolean;
}

const DEFAULT_READY_TIMEOUT = 300;
const DEFAULT_STOP_TIMEOUT = 120;
const MAX_SECONDS = 365 * 24 * 3600;
const NDJSON = "application/x-ndjson";
const FRAME_STDIN = 0;
const FRAME_STDOUT = 1;
const FRAME_STDERR = 2;
const FRAME_EXIT = 3;
const MAX_FRAME = 1 << 20;

function sandboxPath(id: string, ...rest: string[]): string {
  return ["/v1/sandboxes", encodeURIComponent(id), ...rest].join("/");
}

function argv(cmd: Command): string[] {
  if (typeof cmd === "string") return ["sh", "-c", cmd];
  const a = cmd.map(String);
  if (!a.length) throw new TypeError("an empty command");
  return a;
}

function envList(env: EnvVars | undefined): string[] | undefined {
  if (env === undefined) return undefined;
  if (Array.isArray(env)) return env.map(String);
  return Object.entries(env as Record<string, string>).map(([k, v]) => `${k}=${v}`);
}

function bytes(data: Buffer | Uint8Array | string): Buffer {
  return typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
}

function seconds(name: string, v: number | null | undefined): number {
  if (v === null || v === undefined) return 0;
  if (typeof v !== "number" || Number.isNaN(v) || v < 0 || v > MAX_SECONDS) {
    throw new RangeError(`${name}: must be between 0 and ${MAX_SECONDS} seconds (a year), not ${String(v)}`);
  }
  return v;
}

function manifestBody(manifest: Manifest, projectDir?: string, vars?: Record<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (typeof manifest === "string") body["manifest_toml"] = manifest;
  else if (manifest instanceof URL) body["manifest_toml"] = readFileSync(manifest, "utf8");
  else if (manifest && typeof manifest === "object") body["manifest_doc"] = manifest;
  else throw new TypeError("a manifest is TOML text, an object or a file: URL");
  if (projectDir !== undefined) body["project_dir"] = projectDir;
  if (vars && Object.keys(vars).length) body["vars"] = vars;
  return body;
}

function execControl(timeout: number | undefined, killGrace: number | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  const t = seconds("timeout", timeout);
  const k = seconds("killGrace", killGrace);
  if (t) out["timeout"] = t;
  if (k) out["kill_grace"] = k;
  return out;
}

function deadlineLeft(deadline: number | undefined): number | undefined {
  return deadline === undefined ? undefined : (deadline - Date.now()) / 1000;
}

function frameHeader(typ: number, n: number): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt8(typ, 0);
  h.writeUInt32BE(n, 4);
  return h;
}

/** Frames of the stream protocol read from an upgraded connection: an 8-byte header (type, 3 zero bytes, length), then the payload. */
async function* readFrames(conn: Duplex): AsyncGenerator<[number, Buffer]> {
  let buf: Buffer = Buffer.alloc(0);
  for await (const chunk of conn as AsyncIterable<Buffer>) {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= 8) {
      const n = buf.readUInt32BE(4);
      if (n > MAX_FRAME) throw new ProtocolError(`a frame of ${n} bytes, more than ${MAX_FRAME}`);
      if (buf.length < 8 + n) break;
      yield [buf.readUInt8(0), Buffer.from(buf.subarray(8, 8 + n))];
      buf = buf.subarray(8 + n);
    }
  }
  if (buf.length) throw new ProtocolError("the stream ended within a frame");
}

/**
 * A client of one airlock daemon: `new Client()` is the user's own (its Unix
 * socket, or $AIRLOCK_HOST); `new Client({ host: "tcp://box:7878", token })`,
 * `"ssh://me@box"`… follow the CLI's rule for addresses. A bad address throws
 * a TypeError before anything is sent.
 */
export class Client {
  /** @internal */
  readonly t: Transport;

  constructor(options: ClientOptions = {}) {
    const timeout = options.timeout ?? 60;
    this.t = new Transport(resolveTarget(options, options.env ?? process.env), timeout > 0 ? timeout * 1000 : undefined);
  }

  /** The daemon's address, for messages: a socket's path, http(s)://host:port or ssh://… (never the token). */
  get address(): string {
    return this.t.where;
  }

  /** Where and how the client reaches its daemon (the transport, TLS, the CA, ssh's command line). */
  get target(): Readonly<Target> {
    return this.t.target;
  }

  /** Ends the client's ssh connection, if it has one (a later request starts another). */
  close(): void {
    this.t.close();
  }

  // Printed or serialised, a client shows its address, never its token.
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `Client <${this.address}>`;
  }
  toJSON(): { address: string } {
    return { address: this.address };
  }

  /** GET /v1/health: who the daemon is. */
  health(): Promise<Health> {
    return this.t.json<Health>({ method: "GET", path: "/v1/health" });
  }

  /** GET /metrics: Prometheus' text format. */
  async metrics(): Promise<string> {
    return (await this.t.fetch({ method: "GET", path: "/metrics", headers: { Accept: "text/plain" } })).toString("utf8");
  }

  /** POST /v1/prune: what `airlock prune` removes (with dryRun, would remove). */
  prune(options: { dryRun?: boolean; all?: boolean } = {}): Promise<PruneResult> {
    const body: Record<string, boolean> = {};
    if (options.dryRun) body["dry_run"] = true;
    if (options.all) body["all"] = true;
    return this.postJSON<PruneResult>("/v1/prune", body);
  }

  /** @internal */
  postJSON<T>(path: string, body: unknown, method = "POST"): Promise<T> {
    return this.t.json<T>({ method, path, body: JSON.stringify(body), headers: { "Content-Type": "application/json" } });
  }

  /** A handle of an existing sandbox (no request). */
  sandbox(id: string): Sandbox {
    return new Sandbox(this, id);
  }

  /** A sandbox's record. */
  get(id: string): Promise<SandboxInfo> {
    return this.t.json<SandboxInfo>({ method: "GET", path: sandboxPath(id) });
  }

  /** The records of the sandboxes (carrying all of `labels`), deleted ones left out. */
  async list(options: { labels?: Record<string, string> } = {}): Promise<SandboxInfo[]> {
    const q: Array<[string, string]> = Object.entries(options.labels ?? {}).map(([k, v]) => ["label", `${k}=${v}`]);
    return (await this.t.json<SandboxInfo[] | null>({ method: "GET", path: "/v1/sandboxes", query: q })) ?? [];
  }

  /**
   * Creates a sandbox (kind up: it idles, with its daemons, until stopped)
   * from a manifest, or of a snapshot (manifest null, options.fromSnapshot);
   * with `wait` (the default) once it is ready. A sandbox that fails first
   * throws SandboxFailedError, one not ready in time WaitTimeoutError; either
   * way it is deleted unless keepOnFailure.
   */
  async create(manifest: Manifest | null | undefined, options: CreateOptions = {}): Promise<Sandbox> {
    const o = options;
    if ((manifest === null || manifest === undefined) === (o.fromSnapshot === undefined)) {
      throw new TypeError("create: give a manifest or fromSnapshot, one of them");
    }
    const source =
      manifest === null || manifest === undefined ? { from_snapshot: o.fromSnapshot } : manifestBody(manifest, o.projectDir, o.vars);
    const body: Record<string, unknown> = { kind: "up", start: o.start ?? true, ...source };
    const lifetime = seconds("lifetime", o.lifetime);
    const idle = seconds("idleTimeout", o.idleTimeout);
    if (lifetime) body["timeout"] = lifetime;
    if (o.onTimeout) body["on_timeout"] = o.onTimeout;
    if (idle) body["idle_timeout"] = idle;
    if (o.onIdle) body["on_idle"] = o.onIdle;
    if (o.id !== undefined) body["id"] = o.id;
    if (o.labels && Object.keys(o.labels).length) body["labels"] = o.labels;
    const env = envList(o.env);
    if (env) body["env"] = env;
    if (o.noPool) body["no_pool"] = true;
    const info = await this.postJSON<SandboxInfo>("/v1/sandboxes", body);
    const sb = new Sandbox(this, info.id, info);
    if (!(o.wait ?? true) || !(o.start ?? true)) return sb;
    try {
      await sb.waitReady(o.timeout ?? DEFAULT_READY_TIMEOUT);
    } catch (e) {
      if (!o.keepOnFailure) await this.deleteQuietly(info.id);
      throw e;
    }
    return sb;
  }

  /** @internal */
  async deleteQuietly(id: string): Promise<void> {
    try {
      await this.t.fetch({ method: "DELETE", path: sandboxPath(id) });
    } catch (e) {
      if (!(e instanceof AirlockError)) throw e;
    }
  }

  /**
   * Runs one command in a sandbox of its own, as `airlock run` does: a
   * sandbox of kind run made from the manifest runs `cmd` as its main command
   * and is removed once it exited (unless keep). Its result names the sandbox.
   */
  async run(manifest: Manifest, cmd: Command, options: ClientRunOptions = {}): Promise<ExecResult> {
    const o = options;
    const body: Record<string, unknown> = {
      kind: "run",
      start: false,
      command: argv(cmd),
      fast_end: true,
      ...manifestBody(manifest, o.projectDir, o.vars),
    };
    if (!o.keep) body["remove_on_exit"] = true;
    if (o.stdin !== undefined) body["stdin"] = true;
    const env = envList(o.env);
    if (env) body["env"] = env;
    if (o.workdir !== undefined) body["workdir"] = o.workdir;
    if (o.id !== undefined) body["id"] = o.id;
    if (o.labels && Object.keys(o.labels).length) body["labels"] = o.labels;
    if (o.noPool) body["no_pool"] = true;
    const sid = (await this.postJSON<SandboxInfo>("/v1/sandboxes", body)).id;
    let res: ExecResult;
    try {
      await this.waitCreated(sid, o.timeout ?? DEFAULT_READY_TIMEOUT);
      // Attached before the start: no output is missed.
      const conn = await this.t.upgrade(sandboxPath(sid, "attach"), { stdin: o.stdin !== undefined });
      try {
        if (o.stdin !== undefined) {
          const raw = bytes(o.stdin);
          const parts: Buffer[] = [];
          for (let i = 0; i < raw.length; i += MAX_FRAME) {
            const piece = raw.subarray(i, i + MAX_FRAME);
            parts.push(frameHeader(FRAME_STDIN, piece.length), piece);
          }
          parts.push(frameHeader(FRAME_STDIN, 0));
          conn.write(Buffer.concat(parts), () => undefined);
        }
        conn.on("error", () => undefined);
        const frames = readFrames(conn);
        await this.postJSON(sandboxPath(sid, "resume"), {});
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        let exit: Buffer | undefined;
        try {
          for await (const [typ, payload] of frames) {
            if (typ === FRAME_EXIT) {
              exit = payload;
              break;
            }
            if (typ === FRAME_STDOUT) out.push(payload);
            else if (typ === FRAME_STDERR) err.push(payload);
          }
        } catch (e) {
          if (e instanceof AirlockError) throw e;
          throw new ProtocolError(`the main command's stream of sandbox ${sid} broke: ${(e as Error).message}`);
        }
        if (exit === undefined) {
          const cur = await this.get(sid);
          if (cur.state === "failed") {
            throw new SandboxFailedError(`sandbox ${sid} failed${cur.reason ? `: ${cur.reason}` : ""}`, {
              sandboxId: sid,
              state: cur.state,
              sandboxReason: cur.reason ?? "",
            });
          }
          throw new ProtocolError(`the main command's stream of sandbox ${sid} ended before its exit code`);
        }
        let doc: api.ExitFrame;
        try {
          doc = JSON.parse(exit.toString("utf8")) as api.ExitFrame;
        } catch {
          throw new ProtocolError(`an exit frame that is not JSON: ${JSON.stringify(exit.subarray(0, 200).toString("utf8"))}`);
        }
        if (doc.error) throw new EngineError(`sandbox ${sid}: ${doc.error}`);
        res = new ExecResult({
          exitCode: typeof doc.exit_code === "number" ? doc.exit_code : -1,
          stdout: Buffer.concat(out),
          stderr: Buffer.concat(err),
          sandboxId: sid,
        });
      } finally {
        conn.destroy();
      }
    } catch (e) {
      if (!o.keep) await this.deleteQuietly(sid);
      throw e;
    }
    return o.check ? res.check() : res;
  }

  /** A sandbox's events (GET …/events as NDJSON): sent when first read. */
  events(id: string, options: { fromSeq?: number; follow?: boolean; timeout?: number } = {}): EventStream {
    const q: Record<string, string | number | undefined> = {};
    if (options.fromSeq !== undefined) q["from"] = options.fromSeq;
    if (options.follow ?? true) q["follow"] = 1;
    return new EventStream(
      () => this.t.open({ method: "GET", path: sandboxPath(id, "events"), query: q, headers: { Accept: NDJSON }, stream: true }),
      options.timeout,
    );
  }

  private async waitCreated(id: string, timeout: number | undefined): Promise<void> {
    const deadline = timeout === undefined ? undefined : Date.now() + timeout * 1000;
    let seq: number | undefined;
    for (;;) {
      const left = deadlineLeft(deadline);
      if (left !== undefined && left <= 0) throw new WaitTimeoutError(`sandbox ${id} was not created within ${timeout} s`);
      const stream = this.events(id, { fromSeq: seq, follow: true, timeout: left });
      try {
        let ended = true;
        for await (const ev of stream) {
          if (ev.kind === "stream.error") {
            ended = false;
            break;
          }
          seq = ev.sequence || seq;
          if (ev.kind === "sandbox.created") return;
          if (ev.kind === "sandbox.failed" || ["failed", "deleting", "deleted"].includes(ev.state)) {
            throw new SandboxFailedError(`sandbox ${id} failed before its command ran${ev.reason ? `: ${ev.reason}` : ""}`, {
              sandboxId: id,
              state: ev.state,
              sandboxReason: ev.reason ?? "",
            });
          }
        }
        if (ended) throw new ProtocolError(`the daemon ended the events of sandbox ${id} before it was created`);
      } catch (e) {
        if (e instanceof WaitTimeoutError) throw new WaitTimeoutError(`sandbox ${id} was not created within ${timeout} s`);
        throw e;
      } finally {
        stream.close();
      }
    }
  }

  /**
   * Follows a sandbox's events until done(kind, state) holds (for an event, or
   * its record first). failed(kind, state) first throws SandboxFailedError;
   * after `timeout` seconds WaitTimeoutError. With goneOk a sandbox that is no
   * more ends the wait.
   * @internal
   */
  async waitUntil(
    id: string,
    o: {
      what: string;
      done: (kind: string, state: string) => boolean;
      failed?: (kind: string, state: string) => boolean;
      timeout: number | undefined;
      goneOk?: boolean;
    },
  ): Promise<void> {
    const deadline = o.timeout === undefined ? undefined : Date.now() + o.timeout * 1000;
    const failure = (info: SandboxInfo): SandboxFailedError => {
      const word = info.state === "deleting" ? "deleted" : info.state;
      return new SandboxFailedError(`sandbox ${id} ${word} before it was ${o.what}${info.reason ? `: ${info.reason}` : ""}`, {
        sandboxId: id,
        state: info.state,
        sandboxReason: info.reason ?? "",
      });
    };
    let info: SandboxInfo;
    try {
      info = await this.get(id);
    } catch (e) {
      if (o.goneOk && e instanceof SandboxNotFoundError) return;
      throw e;
    }
    if (o.done("", info.state)) return;
    if (o.failed?.("", info.state)) throw failure(info);
    let seq = info.last_seq;
    let quietEnds = 0;
    for (;;) {
      const left = deadlineLeft(deadline);
      if (left !== undefined && left <= 0) throw new WaitTimeoutError(`sandbox ${id} was not ${o.what} within ${o.timeout} s`);
      const stream = this.events(id, { fromSeq: seq, follow: true, timeout: left });
      let got = false;
      try {
        for await (const ev of stream) {
          if (ev.kind === "stream.error") break; // fell behind: follow again from seq
          got = true;
          seq = ev.sequence || seq;
          if (o.done(ev.kind, ev.state)) return;
          if (o.failed?.(ev.kind, ev.state)) throw failure(await this.get(id));
        }
      } catch (e) {
        if (o.goneOk && e instanceof SandboxNotFoundError) return;
        if (e instanceof WaitTimeoutError) throw new WaitTimeoutError(`sandbox ${id} was not ${o.what} within ${o.timeout} s`);
        throw e;
      } finally {
        stream.close();
      }
      quietEnds = got ? 0 : quietEnds + 1;
      if (quietEnds >= 2) throw new ProtocolError(`the daemon ended the events of sandbox ${id} before it was ${o.what}`);
    }
  }

  /** The warm pools of the daemon (GET /v1/pools). */
  pools(): Promise<PoolList> {
    return this.t.json<PoolList>({ method: "GET", path: "/v1/pools" });
  }

  /** Fills the manifest's warm pool (size, else its [sandbox.pool] size) and returns it once full. */
  warmPool(manifest: Manifest, options: { size?: number; projectDir?: string; vars?: Record<string, string> } = {}): Promise<Pool> {
    const body = manifestBody(manifest, options.projectDir, options.vars);
    if (options.size !== undefined) body["size"] = options.size;
    return this.postJSON<Pool>("/v1/pools/warm", body);
  }

  /** Removes the parked sandboxes of a project's pools, or of all ({ all: true }): how many were removed. */
  async drainPools(options: { project: string } | { all: true }): Promise<number> {
    const body = "all" in options && options.all ? { all: true } : { project: (options as { project: string }).project };
    const r = await this.postJSON<api.DrainResult>("/v1/pools/drain", body);
    return r.removed ?? 0;
  }

  /** The snapshots the daemon holds. */
  async snapshots(): Promise<SnapshotInfo[]> {
    return (await this.t.json<SnapshotInfo[] | null>({ method: "GET", path: "/v1/snapshots" })) ?? [];
  }

  /** Removes a snapshot (ConflictError while a sandbox made of it exists). */
  deleteSnapshot(name: string): Promise<SnapshotInfo> {
    return this.t.json<SnapshotInfo>({ method: "DELETE", path: `/v1/snapshots/${encodeURIComponent(name)}` });
  }
}

/**
 * A sandbox: its commands, files, events and lifecycle. `info` is its record
 * as last read (undefined for a handle of Client.sandbox until refresh()).
 */
export class Sandbox {
  readonly client: Client;
  readonly id: string;
  info: SandboxInfo | undefined;

  constructor(client: Client, id: string, info?: SandboxInfo) {
    this.client = client;
    this.id = id;
    this.info = info;
  }

  private get t(): Transport {
    return this.client.t;
  }

  /** Reads the record again. */
  async refresh(): Promise<SandboxInfo> {
    this.info = await this.client.get(this.id);
    return this.info;
  }

  /** The state now. */
  async state(): Promise<SandboxInfo["state"]> {
    return (await this.refresh()).state;
  }

  /** Waits until it is ready (SandboxFailedError when it fails, stops or is deleted first; WaitTimeoutError). */
  async waitReady(timeout: number = DEFAULT_READY_TIMEOUT): Promise<SandboxInfo> {
    await this.client.waitUntil(this.id, {
      what: "ready",
      timeout,
      done: (kind, state) => kind === "sandbox.ready" || state === "ready",
      failed: (kind, state) => kind === "sandbox.failed" || ["failed", "stopped", "deleting", "deleted"].includes(state),
    });
    return this.refresh();
  }

  /** Stops it (files stay readable); with wait (the default) the record once stopped. */
  async stop(options: { wait?: boolean; timeout?: number } = {}): Promise<SandboxInfo> {
    this.info = await this.client.postJSON<SandboxInfo>(sandboxPath(this.id, "stop"), {});
    if (!(options.wait ?? true)) return this.info;
    await this.client.waitUntil(this.id, {
      what: "stopped",
      timeout: options.timeout ?? DEFAULT_STOP_TIMEOUT,
      done: (kind, state) => kind === "sandbox.stopped" || state === "stopped",
      failed: (_kind, state) => ["failed", "deleting", "deleted"].includes(state),
    });
    return this.refresh();
  }

  /** Starts a stopped sandbox again; with wait (the default) the record once ready. */
  async resume(options: { wait?: boolean; timeout?: number } = {}): Promise<SandboxInfo> {
    this.info = await this.client.postJSON<SandboxInfo>(sandboxPath(this.id, "resume"), {});
    if (!(options.wait ?? true)) return this.info;
    // The record says stopped until the sandbox is ready again (sandbox.started
    // comes first, in state stopped): only a failure or a deletion ends the wait early.
    await this.client.waitUntil(this.id, {
      what: "ready",
      timeout: options.timeout ?? DEFAULT_READY_TIMEOUT,
      done: (kind, state) => kind === "sandbox.ready" || state === "ready",
      failed: (kind, state) => kind === "sandbox.failed" || ["failed", "deleting", "deleted"].includes(state),
    });
    return this.refresh();
  }

  /**
   * Removes its containers, network and volumes; with wait (the default)
   * until sandbox.deleted. One already gone is no error. The record stays,
   * in state deleted.
   */
  async delete(options: { wait?: boolean; timeout?: number } = {}): Promise<void> {
    try {
      this.info = await this.t.json<SandboxInfo>({ method: "DELETE", path: sandboxPath(this.id) });
    } catch (e) {
      if (e instanceof SandboxNotFoundError) return;
      throw e;
    }
    if (options.wait ?? true) {
      await this.client.waitUntil(this.id, {
        what: "deleted",
        timeout: options.timeout ?? DEFAULT_STOP_TIMEOUT,
        goneOk: true,
        done: (kind, state) => kind === "sandbox.deleted" || state === "deleted",
      });
    }
  }

  /** Deletes it: `await using sb = await client.create(…)` deletes it at the end of the block. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.delete();
  }

  /** Freezes it in place (its processes keep their memory); the record, state paused. */
  async pause(): Promise<SandboxInfo> {
    this.info = await this.client.postJSON<SandboxInfo>(sandboxPath(this.id, "pause"), {});
    return this.info;
  }

  /** Lets a paused sandbox go on where it was; the record, state ready. */
  async unpause(): Promise<SandboxInfo> {
    this.info = await this.client.postJSON<SandboxInfo>(sandboxPath(this.id, "unpause"), {});
    return this.info;
  }

  /** Sets its deadline: `timeout` seconds from now (null: none); the record. */
  async setTimeout(timeout: number | null, options: { onTimeout?: "delete" | "stop" } = {}): Promise<SandboxInfo> {
    const body: Record<string, unknown> = { timeout: seconds("timeout", timeout) };
    if (options.onTimeout) body["on_timeout"] = options.onTimeout;
    this.info = await this.client.postJSON<SandboxInfo>(sandboxPath(this.id), body, "PATCH");
    return this.info;
  }

  /** Sets its own idle timeout in seconds (null: the daemon's runtime.idle_ttl); the record. */
  async setIdleTimeout(idleTimeout: number | null, options: { onIdle?: "delete" | "stop" | "pause" } = {}): Promise<SandboxInfo> {
    const body: Record<string, unknown> = { idle_timeout: seconds("idleTimeout", idleTimeout) };
    if (options.onIdle) body["on_idle"] = options.onIdle;
    this.info = await this.client.postJSON<SandboxInfo>(sandboxPath(this.id), body, "PATCH");
    return this.info;
  }

  /** Its events after fromSeq (all without it), then, with follow (the default), the live ones. */
  events(options: { fromSeq?: number; follow?: boolean; timeout?: number } = {}): EventStream {
    return this.client.events(this.id, options);
  }

  /** A command, its frames as it writes them (sent when first read). Closing it early kills the command. */
  execStream(cmd: Command, options: ExecOptions = {}): ExecStream {
    const body: Record<string, unknown> = { cmd: argv(cmd), ...execControl(options.timeout, options.killGrace) };
    if (options.id !== undefined) body["id"] = options.id;
    const env = envList(options.env);
    if (env) body["env"] = env;
    if (options.workdir !== undefined) body["workdir"] = options.workdir;
    if (options.stdin !== undefined) body["stdin"] = bytes(options.stdin).toString("base64");
    return new ExecStream(() =>
      this.t.open({
        method: "POST",
        path: sandboxPath(this.id, "execs"),
        body: JSON.stringify(body),
        headers: { "Content-Type": "application/json", Accept: NDJSON },
        stream: true,
      }),
    );
  }

  /**
   * Runs a command to its end: its exit code and output (a command not found
   * is 127, one that timed out 124). With background it starts it and returns
   * its Exec handle at once.
   */
  run(cmd: Command, options: RunOptions & { background: true }): Promise<Exec>;
  run(cmd: Command, options?: RunOptions & { background?: false }): Promise<ExecResult>;
  async run(cmd: Command, options: RunOptions = {}): Promise<ExecResult | Exec> {
    if (options.background) return this.startExec(cmd, options);
    const stream = this.execStream(cmd, options);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    try {
      for await (const f of stream) {
        if (!f.data) continue;
        if (f.stream === "stdout") {
          out.push(f.data);
          await options.onStdout?.(f.data);
        } else if (f.stream === "stderr") {
          err.push(f.data);
          await options.onStderr?.(f.data);
        }
      }
    } finally {
      stream.close();
    }
    if (stream.exitCode === undefined) throw new ProtocolError("the exec's stream ended before its exit code");
    const res = new ExecResult({ exitCode: stream.exitCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err), execId: stream.exec?.id ?? "" });
    return options.check ? res.check() : res;
  }

  private async startExec(cmd: Command, options: RunOptions): Promise<Exec> {
    if (options.stdin !== undefined || options.check) {
      throw new TypeError("a background exec takes no stdin and no check (check the result of wait())");
    }
    const body: Record<string, unknown> = { cmd: argv(cmd), ...execControl(options.timeout, options.killGrace), background: true };
    if (options.id !== undefined) body["id"] = options.id;
    const env = envList(options.env);
    if (env) body["env"] = env;
    if (options.workdir !== undefined) body["workdir"] = options.workdir;
    const info = await this.client.postJSON<ExecInfo>(sandboxPath(this.id, "execs"), body);
    const ex = new Exec(this, info.id, info);
    ex.follow(options.onStdout, options.onStderr);
    return ex;
  }

  /** Its exec records, oldest first (running: only those not ended). */
  async execs(options: { running?: boolean; limit?: number } = {}): Promise<ExecInfo[]> {
    const q: Record<string, string | number | undefined> = {};
    if (options.running) q["running"] = 1;
    if (options.limit !== undefined) q["limit"] = options.limit;
    return (await this.t.json<ExecInfo[] | null>({ method: "GET", path: sandboxPath(this.id, "execs"), query: q })) ?? [];
  }

  /** One exec's handle (no request). */
  exec(execId: string): Exec {
    return new Exec(this, execId);
  }

  // Files.

  /** `data` (bytes, or text as UTF-8) becomes the regular file `path` (missing directories are made). */
  async writeFile(path: string, data: Buffer | Uint8Array | string, options: { mode?: number } = {}): Promise<void> {
    const mode = (options.mode ?? 0o644).toString(8).padStart(4, "0");
    await this.t.fetch({
      method: "PUT",
      path: sandboxPath(this.id, "files"),
      query: { path, mode },
      body: bytes(data),
      headers: { "Content-Type": "application/octet-stream" },
    });
  }

  /** One regular file's bytes (NotAFileError for a directory, PathNotFoundError for nothing). */
  readFile(path: string): Promise<Buffer> {
    return this.t.fetch({
      method: "GET",
      path: sandboxPath(this.id, "files"),
      query: { path },
      headers: { Accept: "application/octet-stream" },
    });
  }

  /** One regular file as text (UTF-8). */
  async readText(path: string): Promise<string> {
    return (await this.readFile(path)).toString("utf8");
  }

  /** A tar stream extracted into the directory `path`. */
  async writeArchive(path: string, tar: Buffer): Promise<void> {
    await this.t.fetch({
      method: "PUT",
      path: sandboxPath(this.id, "files"),
      query: { path },
      body: tar,
      headers: { "Content-Type": "application/x-tar" },
    });
  }

  /** A tar of `path`. */
  readArchive(path: string): Promise<Buffer> {
    return this.t.fetch({ method: "GET", path: sandboxPath(this.id, "files"), query: { path }, headers: { Accept: "application/x-tar" } });
  }

  /** The directory's entries sorted by name (with depth > 1 its subdirectories' too); `truncated` says there were more than `limit`. */
  async listDir(path: string, options: { depth?: number; limit?: number } = {}): Promise<FileEntry[] & { truncated: boolean }> {
    const doc = await this.t.json<api.FileList>({
      method: "GET",
      path: sandboxPath(this.id, "files", "list"),
      query: { path, depth: options.depth ?? 1, limit: options.limit },
    });
    return Object.assign(doc.entries ?? [], { truncated: Boolean(doc.truncated) });
  }

  /** One path, a symbolic link described, not followed. */
  stat(path: string): Promise<FileEntry> {
    return this.t.json<FileEntry>({ method: "GET", path: sandboxPath(this.id, "files", "stat"), query: { path } });
  }

  /** Whether stat finds the path. */
  async exists(path: string): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (e) {
      if (e instanceof AirlockError && e.reason === "path_not_found") return false;
      throw e;
    }
  }

  /** Removes a file, a link or an empty directory; with recursive a directory and all it holds. */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.t.fetch({ method: "DELETE", path: sandboxPath(this.id, "files"), query: { path, recursive: options.recursive } });
  }

  /** Makes a directory (mode 0755); with parents the missing ones too (and an existing one is no error). */
  async mkdir(path: string, options: { parents?: boolean } = {}): Promise<void> {
    await this.t.fetch({ method: "POST", path: sandboxPath(this.id, "files", "mkdir"), query: { path, parents: options.parents } });
  }

  /** Renames within the sandbox; an existing dst is PathExistsError unless overwrite. */
  async rename(src: string, dst: string, options: { overwrite?: boolean } = {}): Promise<void> {
    await this.t.fetch({
      method: "POST",
      path: sandboxPath(this.id, "files", "rename"),
      query: { from: src, to: dst, overwrite: options.overwrite },
    });
  }

  // Snapshots and forks.

  /** Saves the files of its primary and services as a snapshot (memory is not saved). */
  snapshot(name?: string): Promise<SnapshotInfo> {
    return this.client.postJSON<SnapshotInfo>(sandboxPath(this.id, "snapshots"), name ? { name } : {});
  }

  /**
   * `n` copies of this running sandbox (ids names them); with wait (the
   * default) each ready. Whole or nothing. `snapshot` is the fork's snapshot,
   * which stays: remove it (Client.deleteSnapshot) once the copies are deleted.
   */
  async fork(
    n?: number,
    options: { ids?: string[]; wait?: boolean; timeout?: number } = {},
  ): Promise<Sandbox[] & { snapshot: SnapshotInfo }> {
    const body: Record<string, unknown> = {};
    let count = n;
    if (options.ids !== undefined) {
      if (!options.ids.length) throw new TypeError("fork: ids must be a list of sandbox IDs, one a copy");
      body["ids"] = options.ids;
      if (count === undefined) count = options.ids.length;
      else if (count !== options.ids.length) throw new RangeError(`fork: ${options.ids.length} ids given for n=${count}: give one a copy`);
    }
    count ??= 1;
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`fork: n must be a whole number of copies, at least 1, not ${count}`);
    body["count"] = count;
    const doc = await this.client.postJSON<api.Fork>(sandboxPath(this.id, "fork"), body);
    const copies = (doc.sandboxes ?? []).map((info) => new Sandbox(this.client, info.id, info));
    if (options.wait ?? true) {
      await Promise.all(copies.map((c) => c.waitReady(options.timeout ?? DEFAULT_READY_TIMEOUT)));
    }
    return Object.assign(copies, { snapshot: doc.snapshot });
  }
}

/**
 * A background exec: it runs on with no client until it ends, its timeout
 * passes or it is signalled. wait() gives its result; output() its bytes from
 * any byte; signal() and kill() reach its process group.
 */
export class Exec {
  readonly sandbox: Sandbox;
  readonly id: string;
  /** The record as last read. */
  record: ExecInfo | undefined;
  private followers: Promise<void>[] = [];

  constructor(sandbox: Sandbox, id: string, record?: ExecInfo) {
    this.sandbox = sandbox;
    this.id = id;
    this.record = record;
  }

  private get t(): Transport {
    return this.sandbox.client.t;
  }

  private path(...rest: string[]): string {
    return sandboxPath(this.sandbox.id, "execs", encodeURIComponent(this.id), ...rest);
  }

  /** @internal Calls the callbacks with the output as it comes (their errors are thrown by wait()). */
  follow(onStdout?: (b: Buffer) => void | Promise<void>, onStderr?: (b: Buffer) => void | Promise<void>): void {
    const one = async (stream: "stdout" | "stderr", cb: (b: Buffer) => void | Promise<void>): Promise<void> => {
      for await (const chunk of this.output(stream, { follow: true })) await cb(chunk);
    };
    if (onStdout) this.followers.push(one("stdout", onStdout));
    if (onStderr) this.followers.push(one("stderr", onStderr));
    for (const f of this.followers) f.catch(() => undefined);
  }

  /** Its record now. */
  async info(): Promise<ExecInfo> {
    this.record = await this.t.json<ExecInfo>({ method: "GET", path: this.path() });
    return this.record;
  }

  /** Whether it has not ended. */
  async running(): Promise<boolean> {
    return (await this.info()).exit_code === undefined;
  }

  /** Sends a signal (a name, "TERM" or "SIGTERM", or a number) to its process group; InvalidStateError once it ended. */
  async signal(signal: string | number): Promise<ExecInfo> {
    this.record = await this.sandbox.client.postJSON<ExecInfo>(this.path("signal"), { signal: String(signal) });
    return this.record;
  }

  /** SIGKILL to its process group. */
  kill(): Promise<ExecInfo> {
    return this.signal("KILL");
  }

  /** Its stdout or stderr from byte `start`; with follow until it ends (close it to stop early). */
  output(stream: "stdout" | "stderr" = "stdout", options: { start?: number; follow?: boolean } = {}): ExecOutput {
    if (stream !== "stdout" && stream !== "stderr") throw new TypeError(`stream: "stdout" or "stderr", not ${String(stream)}`);
    const start = options.start ?? 0;
    if (!Number.isInteger(start) || start < 0) throw new RangeError(`start: a byte offset (0 or more), not ${start}`);
    return new ExecOutput(() =>
      this.t.open({
        method: "GET",
        path: this.path("output"),
        query: { stream, from: start || undefined, follow: options.follow ? 1 : undefined },
        headers: { Accept: "application/octet-stream" },
        stream: Boolean(options.follow),
      }),
    );
  }

  /** Waits for its end: its exit code and whole output (WaitTimeoutError after `timeout` seconds; it runs on). */
  async wait(options: { timeout?: number } = {}): Promise<ExecResult> {
    const info = await this.waitEnd(options.timeout);
    await Promise.all(this.followers);
    if (info.exit_code === undefined) throw new ProtocolError(`exec ${this.id} has no exit code after its end`);
    const read = async (stream: "stdout" | "stderr"): Promise<Buffer> => {
      const res = await this.t.open({
        method: "GET",
        path: this.path("output"),
        query: { stream },
        headers: { Accept: "application/octet-stream" },
      });
      return readAll(res);
    };
    const [stdout, stderr] = await Promise.all([read("stdout"), read("stderr")]);
    return new ExecResult({ exitCode: info.exit_code, stdout, stderr, execId: this.id });
  }

  private async waitEnd(timeout: number | undefined): Promise<ExecInfo> {
    const deadline = timeout === undefined ? undefined : Date.now() + timeout * 1000;
    const sid = this.sandbox.id;
    // The sequence first, then the record: an end after it is in the events followed.
    let seq = (await this.sandbox.client.get(sid)).last_seq;
    let info = await this.info();
    let quietEnds = 0;
    while (info.exit_code === undefined) {
      const left = deadlineLeft(deadline);
      if (left !== undefined && left <= 0) throw new WaitTimeoutError(`exec ${this.id} did not end within ${timeout} s`);
      const stream = this.sandbox.client.events(sid, { fromSeq: seq, follow: true, timeout: left });
      let got = false;
      try {
        for await (const ev of stream) {
          if (ev.kind === "stream.error") break;
          got = true;
          seq = ev.sequence || seq;
          if (ev.kind === "exec.finished" && ev.exec_id === this.id) {
            info = await this.info();
            if (info.exit_code === undefined && ev.exit_code !== undefined) info = { ...info, exit_code: ev.exit_code };
            return info;
          }
        }
      } catch (e) {
        if (e instanceof WaitTimeoutError) throw new WaitTimeoutError(`exec ${this.id} did not end within ${timeout} s`);
        throw e;
      } finally {
        stream.close();
      }
      info = await this.info();
      quietEnds = got ? 0 : quietEnds + 1;
      if (info.exit_code === undefined && quietEnds >= 2) {
        throw new ProtocolError(`the daemon ended the events of sandbox ${sid} before exec ${this.id} ended`);
      }
    }
    return info;
  }
}

