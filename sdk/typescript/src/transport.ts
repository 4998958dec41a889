// How a client reaches the daemon: HTTP/1.1 over its Unix socket, TCP
// (optionally TLS, with the token), or a stream of the client's one ssh
// connection (mux.ts). Every request opens a connection of its own and closes
// it once its answer was read: a Unix socket or a mux stream costs nothing to
// open, and a stream (events, a streamed exec) holds its connection for as
// long as it is read anyway.
import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { isIP } from "node:net";
import type { Duplex } from "node:stream";
import { checkRuntimeDir, describeTarget, hostPort, type Target } from "./address.js";
import { DaemonUnreachableError, errorFromResponse, ProtocolError } from "./errors.js";
import { Mux } from "./mux.js";

/** A query: pairs (a name may repeat) or a record; undefined and false values are left out. */
export type Query = Array<[string, string]> | Record<string, string | number | boolean | undefined>;

/** One request to the daemon. */
export interface Request {
  method: string;
  path: string;
  query?: Query;
  body?: Buffer | string;
  headers?: Record<string, string>;
  /** Read the answer without the client's timeout (events, a streamed exec, followed output). */
  stream?: boolean;
}

/** The host name sent to a daemon on a Unix socket or over ssh (any will do). */
const LOCAL_HOST = "airlockd";

/** The protocol a stream upgrade asks for. */
export const STREAM_PROTOCOL = "airlock-stream";

export function target(path: string, query?: Query): string {
  if (!query) return path;
  const q = new URLSearchParams();
  const pairs = Array.isArray(query) ? query : Object.entries(query);
  for (const [k, v] of pairs) {
    if (v === undefined || v === false) continue;
    q.append(k, v === true ? "true" : String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** Reads a whole body. */
export async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(typeof c === "string" ? Buffer.from(c) : c);
  return Buffer.concat(parts);
}

/** Sends requests to one daemon. Made by Client. */
export class Transport {
  readonly target: Target;
  readonly where: string;
  private readonly timeoutMs: number | undefined;
  private ca: Buffer | undefined;
  private mux: Promise<Mux> | undefined;

  constructor(t: Target, timeoutMs: number | undefined) {
    this.target = t;
    this.where = describeTarget(t);
    this.timeoutMs = timeoutMs;
  }

  private async session(): Promise<Mux> {
    const t = this.target;
    if (t.transport !== "ssh") throw new Error("not an ssh target");
    if (this.mux) {
      const m = await this.mux.catch(() => undefined);
      if (m?.alive) return m;
    }
    this.mux = Mux.start([...t.argv, "--mux"], this.where);
    this.mux.catch(() => undefined);
    return this.mux;
  }

  // Printed or serialised, a transport shows where it goes, never its token.
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `Transport <${this.where}>`;
  }
  toJSON(): { address: string } {
    return { address: this.where };
  }

  /** Ends the client's ssh connection, if it has one (a later request starts another). */
  close(): void {
    const m = this.mux;
    this.mux = undefined;
    void m?.then((x) => x.close()).catch(() => undefined);
  }

  private async options(req: Request): Promise<http.RequestOptions & https.RequestOptions> {
    const t = this.target;
    const headers: Record<string, string> = {};
    let host = LOCAL_HOST;
    if (t.transport === "tcp") {
      host = hostPort(t.host, t.port);
      if (t.token) headers["Authorization"] = `Bearer ${t.token}`;
    }
    headers["Host"] = host;
    Object.assign(headers, req.headers ?? {});
    if (req.body !== undefined) headers["Content-Length"] = String(Buffer.byteLength(req.body));
    else if (req.method === "POST" || req.method === "PUT" || req.method === "PATCH") headers["Content-Length"] = "0";
    const o: http.RequestOptions & https.RequestOptions = {
      method: req.method,
      path: target(req.path, req.query),
      headers,
      agent: false,
    };
    switch (t.transport) {
      case "unix":
        if (t.checkRuntimeDir) checkRuntimeDir(t.path);
        o.socketPath = t.path;
        break;
      case "tcp":
        o.host = t.host;
        o.port = t.port;
        if (t.tls) {
          if (t.ca) {
            try {
              this.ca ??= readFileSync(t.ca);
            } catch (e) {
              throw new DaemonUnreachableError(`cannot read the CA file ${t.ca}: ${(e as Error).message}`);
            }
            o.ca = this.ca;
          }
          if (!isIP(t.host)) o.servername = t.host;
        }
        break;
      case "ssh": {
        let mux: Mux;
        try {
          mux = await this.session();
        } catch (e) {
          throw e instanceof DaemonUnreachableError
            ? e
            : new DaemonUnreachableError(`cannot reach the airlock daemon at ${this.where}: ${(e as Error).message}`);
        }
        // A connection of its own per request, made by createConnection: no agent.
        delete o.agent;
        o.createConnection = () => mux.open() as unknown as import("node:net").Socket;
        break;
      }
    }
    return o;
  }

  private send(req: Request, upgrade: boolean): Promise<{ res: http.IncomingMessage; socket?: Duplex }> {
    return this.options(req).then(
      (o) =>
        new Promise((resolve, reject) => {
          const mod = this.target.transport === "tcp" && this.target.tls ? https : http;
          let connected = this.target.transport === "ssh";
          let settled = false;
          const r = mod.request(o);
          const fail = (e: Error): void => {
            if (settled) return;
            settled = true;
            r.destroy();
            reject(
              e instanceof DaemonUnreachableError || e instanceof ProtocolError
                ? e
                : connected
                  ? new DaemonUnreachableError(
                      `the airlock daemon at ${this.where} did not answer ${req.method} ${o.path}: ${e.message}`,
                      { cause: e },
                    )
                  : new DaemonUnreachableError(`cannot reach the airlock daemon at ${this.where}: ${e.message}`, {
                      cause: e,
                    }),
            );
          };
          r.on("socket", (s) => {
            s.once("connect", () => (connected = true));
            s.once("secureConnect", () => (connected = true));
          });
          if (this.timeoutMs) {
            r.setTimeout(this.timeoutMs, () => fail(new Error(`no answer within ${this.timeoutMs! / 1000} s`)));
          }
          r.on("error", fail);
          r.on("response", (res) => {
            if (settled) return;
            settled = true;
            if (res.statusCode !== undefined && res.statusCode >= 400) {
              readAll(res)
                .catch(() => Buffer.alloc(0))
                .then((b) => reject(errorFromResponse(res.statusCode ?? 500, b)));
              return;
            }
            if (upgrade) {
              res.resume();
              reject(new ProtocolError(`cannot attach: the daemon answered ${res.statusCode}, not 101 Switching Protocols`));
              return;
            }
            if (req.stream) r.setTimeout(0);
            resolve({ res });
          });
          r.on("upgrade", (res, socket: Duplex, head: Buffer) => {
            if (settled) return;
            settled = true;
            r.setTimeout(0);
            (socket as { setTimeout?: (ms: number) => void }).setTimeout?.(0);
            if (head.length) socket.unshift(head);
            resolve({ res, socket });
          });
          r.end(req.body);
        }),
    );
  }

  /** Sends a request; its answer once the status is read (an error status throws the error its body names). */
  async open(req: Request): Promise<http.IncomingMessage> {
    return (await this.send(req, false)).res;
  }

  /** Sends a request; its whole answer. */
  async fetch(req: Request): Promise<Buffer> {
    const res = await this.open(req);
    try {
      return await readAll(res);
    } catch (e) {
      throw new ProtocolError(`the answer to ${req.method} ${req.path} broke: ${(e as Error).message}`);
    }
  }

  /** Sends a request; its answer's JSON. */
  async json<T>(req: Request): Promise<T> {
    const b = await this.fetch(req);
    try {
      return JSON.parse(b.toString("utf8")) as T;
    } catch {
      throw new ProtocolError(`the daemon's answer is not JSON: ${JSON.stringify(b.subarray(0, 200).toString("utf8"))}`);
    }
  }

  /** POSTs a JSON body asking to switch to the stream protocol (101); the frames' connection. */
  async upgrade(path: string, body: unknown): Promise<Duplex> {
    const { socket } = await this.send(
      {
        method: "POST",
        path,
        body: JSON.stringify(body),
        headers: { "Content-Type": "application/json", Connection: "Upgrade", Upgrade: STREAM_PROTOCOL },
        stream: true,
      },
      true,
    );
    if (!socket) throw new ProtocolError("cannot attach: no connection after 101 Switching Protocols");
    return socket;
  }
}
