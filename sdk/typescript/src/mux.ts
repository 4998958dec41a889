// One ssh connection per client: many streams over `airlock daemon
// dial-stdio --mux` (the Go package stdiomux is the other end).
//
// The remote side first writes the line "airlock-mux 1 BUILD_ID GOOS GOARCH",
// then frames both ways: a header of 9 bytes (the type, the stream's number
// as a big-endian uint32, the payload's length as a big-endian uint32), then
// the payload. Types: open (this side's streams are odd), data, window (the
// reader read that many bytes: uint32), close-write, close (a payload is an
// error message). Each stream may have WINDOW bytes in flight before its
// reader grants more, so a stream left unread holds up its own writer only.
// Each stream is one connection to the daemon's socket, relayed by the remote
// side: HTTP, streams and upgraded connections work on it as on a socket.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { Duplex } from "node:stream";
import { DaemonUnreachableError, ProtocolError } from "./errors.js";

const OPEN = 1;
const DATA = 2;
const WINDOW_UPDATE = 3;
const CLOSE_WRITE = 4;
const CLOSE = 5;
const HEADER = 9;
/** The bytes a stream may have in flight, sent and not yet read. */
export const WINDOW = 256 << 10;
const MAX_DATA = 32 << 10;
const MAX_CONTROL = 4 << 10;
const HELLO = "airlock-mux 1 ";
const STDERR_MAX = 4 << 10;

function frame(typ: number, sid: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(HEADER);
  h.writeUInt8(typ, 0);
  h.writeUInt32BE(sid, 1);
  h.writeUInt32BE(payload.length, 5);
  return payload.length ? Buffer.concat([h, payload]) : h;
}

/** One stream of a Mux: as much of a socket as node:http and the upgraded connections use. */
export class MuxStream extends Duplex {
  readonly sid: number;
  private readonly mux: Mux;
  private sendWindow = WINDOW;
  private pendingGrant = 0;
  private waiting: (() => void) | undefined;
  private peerClosed = false;
  private closedHere = false;

  constructor(mux: Mux, sid: number) {
    super({ allowHalfOpen: true });
    this.mux = mux;
    this.sid = sid;
  }

  /** One frame of this stream, from the connection's reader. */
  onFrame(typ: number, payload: Buffer): void {
    switch (typ) {
      case DATA:
        if (this.closedHere) return;
        this.pendingGrant += payload.length;
        if (this.push(payload)) this.grant();
        break;
      case WINDOW_UPDATE:
        if (payload.length === 4) {
          this.sendWindow += payload.readUInt32BE(0);
          this.wake();
        }
        break;
      case CLOSE_WRITE:
        this.push(null);
        break;
      case CLOSE: {
        this.peerClosed = true;
        const msg = payload.toString("utf8");
        this.wake();
        if (msg) this.destroy(new Error(msg));
        else this.push(null);
        if (this.closedHere) this.mux.forget(this.sid);
        break;
      }
    }
  }

  /** The connection ended: every read and write fails with its error. */
  fail(err: Error): void {
    this.peerClosed = true;
    this.wake();
    this.destroy(err);
  }

  private grant(): void {
    if (this.pendingGrant > 0 && !this.peerClosed) {
      const p = Buffer.alloc(4);
      p.writeUInt32BE(this.pendingGrant, 0);
      this.pendingGrant = 0;
      this.mux.send(frame(WINDOW_UPDATE, this.sid, p));
    }
  }

  private wake(): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.();
  }

  override _read(): void {
    this.grant();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    let rest = chunk;
    const step = (): void => {
      while (rest.length) {
        if (this.peerClosed) return cb(new Error("the daemon closed the stream"));
        const err = this.mux.error;
        if (err) return cb(err);
        if (this.sendWindow === 0) {
          this.waiting = step;
          return;
        }
        const n = Math.min(rest.length, this.sendWindow, MAX_DATA);
        this.sendWindow -= n;
        this.mux.send(frame(DATA, this.sid, rest.subarray(0, n)));
        rest = rest.subarray(n);
      }
      cb();
    };
    step();
  }

  override _final(cb: (err?: Error | null) => void): void {
    // No close-write: a daemon reading the end of its request would take it for a client gone.
    cb();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    if (!this.closedHere) {
      this.closedHere = true;
      if (!this.mux.error && !this.peerClosed) this.mux.send(frame(CLOSE, this.sid));
      if (this.peerClosed || this.mux.error) this.mux.forget(this.sid);
    }
    this.wake();
    cb(err);
  }

  // What node:http calls on a socket: nothing to do on a stream (ssh's own options bound it).
  setTimeout(_ms: number, cb?: () => void): this {
    void cb;
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

/** The one `ssh … airlock daemon dial-stdio --mux` of a client and its streams. */
export class Mux {
  private readonly where: string;
  private readonly proc: ChildProcessWithoutNullStreams;
  private readonly streams = new Map<number, MuxStream>();
  private next = 1;
  private stderr = "";
  private stderrDone: Promise<void>;
  private buf: Buffer = Buffer.alloc(0);
  /** Why the connection ended (undefined while it runs). */
  error: Error | undefined;

  private constructor(argv: readonly string[], where: string) {
    this.where = where;
    const [cmd, ...args] = argv;
    this.proc = spawn(cmd ?? "ssh", args, { stdio: ["pipe", "pipe", "pipe"] });
    this.stderrDone = new Promise((resolve) => {
      this.proc.stderr.on("data", (b: Buffer) => {
        if (this.stderr.length < STDERR_MAX) this.stderr += b.toString("utf8").slice(0, STDERR_MAX - this.stderr.length);
      });
      this.proc.stderr.on("close", () => resolve());
      this.proc.stderr.on("error", () => resolve());
    });
    this.proc.stdin.on("error", () => {
      // ssh ended: its stdout's end says so, with what ssh said
    });
  }

  /** Starts ssh and waits for the remote side's hello. */
  static async start(argv: readonly string[], where: string): Promise<Mux> {
    const m = new Mux(argv, where);
    await m.hello();
    m.proc.stdout.on("data", (b: Buffer) => m.take(b));
    m.proc.stdout.on("close", () => void m.stderrWait(1000).then(() => m.end(undefined)));
    m.refresh();
    return m;
  }

  private async stderrWait(ms: number): Promise<void> {
    let t: NodeJS.Timeout | undefined;
    await Promise.race([this.stderrDone, new Promise<void>((r) => (t = setTimeout(r, ms)))]);
    clearTimeout(t);
  }

  private hello(): Promise<void> {
    return new Promise((resolve, reject) => {
      let line: Buffer = Buffer.alloc(0);
      const out = this.proc.stdout;
      const fail = async (spawnErr?: Error): Promise<void> => {
        cleanup();
        if (!spawnErr) await this.stderrWait(2000);
        this.kill();
        reject(this.helloError(line.toString("utf8"), spawnErr));
      };
      const onData = (b: Buffer): void => {
        line = Buffer.concat([line, b]);
        const nl = line.indexOf(10);
        if (nl < 0) {
          if (line.length > 1024) void fail();
          return;
        }
        cleanup();
        const first = line.subarray(0, nl).toString("utf8");
        if (!first.startsWith(HELLO)) {
          line = line.subarray(0, nl);
          void (async () => {
            await this.stderrWait(2000);
            this.kill();
            reject(this.helloError(first));
          })();
          return;
        }
        this.buf = line.subarray(nl + 1);
        resolve();
      };
      const onEnd = (): void => void fail();
      const onError = (e: Error): void => void fail(e);
      const cleanup = (): void => {
        out.off("data", onData);
        out.off("end", onEnd);
        this.proc.off("error", onError);
      };
      out.on("data", onData);
      out.on("end", onEnd);
      this.proc.on("error", onError);
    });
  }

  private helloError(line: string, spawnErr?: Error): DaemonUnreachableError {
    const w = this.where;
    if (spawnErr) return new DaemonUnreachableError(`cannot reach the airlock daemon at ${w}: ${spawnErr.message}`);
    const said = this.stderr.trim();
    if (said.includes("unknown flag: --mux")) {
      return new DaemonUnreachableError(
        `cannot reach the airlock daemon at ${w}: the airlock there is older than this SDK (it has no ` +
          `\`daemon dial-stdio --mux\`): update it, e.g. with \`airlock remote install ${w}\` of the CLI`,
      );
    }
    if (said) return new DaemonUnreachableError(`cannot reach the airlock daemon at ${w}: ${said}`);
    if (line) {
      return new DaemonUnreachableError(
        `cannot reach the airlock daemon at ${w}: the remote command said ${JSON.stringify(line.slice(0, 80))}, not the airlock hello`,
      );
    }
    return new DaemonUnreachableError(`cannot reach the airlock daemon at ${w}: the remote command ended`);
  }

  private take(b: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, b]) : b;
    while (this.buf.length >= HEADER) {
      const typ = this.buf.readUInt8(0);
      const sid = this.buf.readUInt32BE(1);
      const n = this.buf.readUInt32BE(5);
      if (n > (typ === DATA ? MAX_DATA : MAX_CONTROL)) {
        this.end(new ProtocolError(`a frame of type ${typ} with ${n} bytes`));
        this.kill();
        return;
      }
      if (this.buf.length < HEADER + n) return;
      const payload = Buffer.from(this.buf.subarray(HEADER, HEADER + n));
      this.buf = this.buf.subarray(HEADER + n);
      const st = this.streams.get(sid);
      if (st) st.onFrame(typ, payload);
      else if (typ < DATA || typ > CLOSE) {
        this.end(new ProtocolError(`unknown frame type ${typ}`));
        this.kill();
        return;
      }
    }
  }

  /** Whether the connection still runs. */
  get alive(): boolean {
    return this.error === undefined;
  }

  /** A new stream: one connection to the daemon. */
  open(): MuxStream {
    if (this.error) throw this.error;
    const sid = this.next;
    this.next += 2;
    const st = new MuxStream(this, sid);
    this.streams.set(sid, st);
    this.send(frame(OPEN, sid));
    this.refresh();
    return st;
  }

  send(b: Buffer): void {
    if (!this.error) this.proc.stdin.write(b);
  }

  forget(sid: number): void {
    this.streams.delete(sid);
    this.refresh();
  }

  // ssh keeps the program alive only while a stream is open.
  private refresh(): void {
    const on = this.streams.size > 0 && !this.error;
    for (const h of [this.proc, this.proc.stdout, this.proc.stderr, this.proc.stdin] as Array<{ ref?: () => void; unref?: () => void }>) {
      if (on) h.ref?.();
      else h.unref?.();
    }
  }

  private end(e: Error | undefined): void {
    if (this.error) return;
    let msg = `the ssh connection to ${this.where} ended`;
    if (e) msg += ` (${e.message})`;
    if (this.stderr.trim()) msg += `: ${this.stderr.trim()}`;
    this.error = new Error(msg);
    const streams = [...this.streams.values()];
    this.streams.clear();
    for (const st of streams) st.fail(this.error);
    this.refresh();
  }

  private kill(): void {
    this.proc.stdin.end();
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGTERM");
  }

  /** Ends ssh and every stream. */
  close(): void {
    this.end(undefined);
    this.kill();
  }
}
