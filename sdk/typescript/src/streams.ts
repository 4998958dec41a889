// The streams a client reads as they come: a sandbox's events, a streamed
// exec's frames, a background exec's output. Each sends its request when it
// is first read (or opened), and holds one connection until it ends or is
// closed.
import type { IncomingMessage } from "node:http";
import { ProtocolError, WaitTimeoutError } from "./errors.js";
import type { Event, ExecFrame, ExecInfo } from "./models.js";
import { ExecResult } from "./models.js";

/** The lines of an NDJSON body, as they come. */
async function* lines(res: IncomingMessage): AsyncGenerator<Buffer> {
  let buf: Buffer = Buffer.alloc(0);
  for await (const chunk of res as AsyncIterable<Buffer>) {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    let nl: number;
    while ((nl = buf.indexOf(10)) >= 0) {
      const line = buf.subarray(0, nl);
      buf = buf.subarray(nl + 1);
      if (line.toString("utf8").trim()) yield line;
    }
  }
  if (buf.toString("utf8").trim()) yield buf;
}

/** A body read lazily: opened on first use, closed by close() or at its end. */
abstract class Lazy<T> implements AsyncIterable<T> {
  private readonly opener: () => Promise<IncomingMessage>;
  private res: IncomingMessage | undefined;
  private it: AsyncGenerator<T> | undefined;
  protected closed = false;

  constructor(opener: () => Promise<IncomingMessage>) {
    this.opener = opener;
  }

  /** Sends the request now (reading does it too); the stream, for chaining. */
  async open(): Promise<this> {
    if (!this.res) {
      if (this.closed) throw new ProtocolError("the stream is closed");
      this.res = await this.opener();
      if (this.closed) this.res.destroy();
    }
    return this;
  }

  protected abstract decode(res: IncomingMessage): AsyncGenerator<T>;

  /** The next item, undefined at the end. */
  async next(): Promise<T | undefined> {
    if (!this.it) {
      await this.open();
      this.it = this.decode(this.res!);
    }
    const r = await this.it.next();
    if (r.done) {
      this.close();
      return undefined;
    }
    return r.value;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    try {
      for (;;) {
        const v = await this.next();
        if (v === undefined) return;
        yield v;
      }
    } finally {
      this.close();
    }
  }

  /** Ends the stream and its connection. */
  close(): void {
    this.closed = true;
    this.res?.destroy();
    this.ended();
  }

  /** Called once closed: what a stream holds beside its connection goes. */
  protected ended(): void {}
}

/**
 * A sandbox's events: those after `fromSeq` (all without it), then, when
 * followed, the live ones until closed. `lastSequence` is the sequence of the
 * last event read: follow again from it after a `stream.error` (a follower that
 * fell behind). `timeout` (seconds) bounds the whole read (WaitTimeoutError).
 */
export class EventStream extends Lazy<Event> {
  /** The sequence of the last event read (0 before the first). */
  lastSequence = 0;
  private readonly timeout: number | undefined;

  constructor(opener: () => Promise<IncomingMessage>, timeout?: number) {
    super(opener);
    this.timeout = timeout;
  }

  private timer: NodeJS.Timeout | undefined;

  protected override ended(): void {
    clearTimeout(this.timer);
  }

  protected async *decode(res: IncomingMessage): AsyncGenerator<Event> {
    let timedOut = false;
    if (this.timeout !== undefined) {
      this.timer = setTimeout(() => {
        timedOut = true;
        res.destroy();
      }, Math.max(0, this.timeout * 1000));
    }
    try {
      for await (const line of lines(res)) {
        let ev: Event;
        try {
          ev = JSON.parse(line.toString("utf8")) as Event;
        } catch {
          throw new ProtocolError(`an event that is not JSON: ${JSON.stringify(line.subarray(0, 200).toString("utf8"))}`);
        }
        if (ev.sequence) this.lastSequence = ev.sequence;
        yield ev;
      }
    } catch (e) {
      if (timedOut) throw new WaitTimeoutError(`no end of the events within ${this.timeout} s`);
      if (this.closed) return;
      if (e instanceof ProtocolError) throw e;
      throw new ProtocolError(`the event stream broke: ${(e as Error).message}`);
    } finally {
      clearTimeout(this.timer);
    }
    if (timedOut) throw new WaitTimeoutError(`no end of the events within ${this.timeout} s`);
  }
}

/**
 * A streamed exec: its frames as the command writes them. First one with
 * `exec` (the record), then output frames, last one with `exitCode`. Closing
 * it before the end kills the command (SIGTERM, then SIGKILL).
 */
export class ExecStream extends Lazy<ExecFrame> {
  /** The exec's record, once its frame was read. */
  exec: ExecInfo | undefined;
  /** The exit code, once the last frame was read. */
  exitCode: number | undefined;

  protected async *decode(res: IncomingMessage): AsyncGenerator<ExecFrame> {
    try {
      for await (const line of lines(res)) {
        let d: Record<string, unknown>;
        try {
          d = JSON.parse(line.toString("utf8")) as Record<string, unknown>;
        } catch {
          throw new ProtocolError(`an exec frame that is not JSON: ${JSON.stringify(line.subarray(0, 200).toString("utf8"))}`);
        }
        const f = execFrame(d);
        if (f.exec) this.exec = f.exec;
        if (f.exitCode !== undefined) this.exitCode = f.exitCode;
        yield f;
      }
    } catch (e) {
      if (this.closed) return;
      if (e instanceof ProtocolError) throw e;
      throw new ProtocolError(`the exec's stream broke: ${(e as Error).message}`);
    }
    if (this.exitCode === undefined && !this.closed) throw new ProtocolError("the exec's stream ended before its exit code");
  }

  /** Reads the frames not read yet to the end: the result, with the output of those frames. */
  async result(): Promise<ExecResult> {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    for (let f = await this.next(); f !== undefined; f = await this.next()) {
      if (f.stream === "stdout" && f.data) out.push(f.data);
      if (f.stream === "stderr" && f.data) err.push(f.data);
    }
    if (this.exitCode === undefined) throw new ProtocolError("the exec's stream ended before its exit code");
    return new ExecResult({
      exitCode: this.exitCode,
      stdout: Buffer.concat(out),
      stderr: Buffer.concat(err),
      execId: this.exec?.id ?? "",
    });
  }
}

/** One NDJSON line of a streamed exec. */
export function execFrame(d: Record<string, unknown>): ExecFrame {
  if (d["exec"] && typeof d["exec"] === "object") return { exec: d["exec"] as ExecInfo };
  if (d["stream"] === "stdout" || d["stream"] === "stderr") {
    const data =
      typeof d["data_b64"] === "string" ? Buffer.from(d["data_b64"], "base64") : Buffer.from(String(d["data"] ?? ""), "utf8");
    return { stream: d["stream"], data };
  }
  if (typeof d["exit_code"] === "number") return { exitCode: d["exit_code"] };
  return {};
}

/** A background exec's output, from any byte: its chunks as they come (with follow, until it ends). */
export class ExecOutput extends Lazy<Buffer> {
  protected async *decode(res: IncomingMessage): AsyncGenerator<Buffer> {
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) yield chunk;
    } catch (e) {
      if (this.closed) return;
      throw new ProtocolError(`the exec's output broke: ${(e as Error).message}`);
    }
  }
}
