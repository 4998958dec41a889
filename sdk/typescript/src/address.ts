// Which daemon a client talks to, and how: the rule of the airlock CLI's -H
// and AIRLOCK_HOST, which every SDK follows (its cases are the table
// sdk/testdata/hosts.json), and the checks of the default socket's directory.
import { lstatSync, readlinkSync } from "node:fs";
import { isIP } from "node:net";
import { homedir, userInfo } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { DaemonUnreachableError, UnsafeRuntimeDirError } from "./errors.js";

/** Where a daemon listens and how to reach it. */
export type Target =
  | { transport: "unix"; path: string; checkRuntimeDir: boolean }
  | {
      transport: "tcp";
      host: string;
      port: number;
      /** host:port, an IPv6 host in brackets. */
      addr: string;
      tls: boolean;
      /** The CA file TLS trusts; "" for the system's CAs. */
      ca: string;
      token: string | undefined;
    }
  | { transport: "ssh"; host: string; user: string; port: number | undefined; argv: string[] };

/** How an ssh:// address is reached: ssh's command, its options, the remote command. */
export interface SSHSettings {
  /** Replaces `ssh` (the command, with any arguments of its own). */
  sshCommand?: readonly string[];
  /** Options added after `-T`, e.g. ["-o", "BatchMode=yes"]. */
  sshOptions?: readonly string[];
  /** Replaces `airlock daemon dial-stdio` on the remote machine (`--mux` is added to it). */
  remoteCommand?: readonly string[];
}

/** What the address rule reads of the environment. */
export type Env = Readonly<Record<string, string | undefined>>;

const ADDRESSES = "unix:///path, tcp://host:port, https://host:port, http://host:port (loopback) or ssh://[user@]host[:port]";

/** The daemon's Unix socket as the airlock CLI computes it. */
export function defaultSocket(env: Env = process.env, platform: string = process.platform): string {
  const rt = env["XDG_RUNTIME_DIR"] ?? "";
  if (rt && isAbsolute(rt)) return join(rt, "airlock", "airlockd.sock");
  if (platform === "darwin") {
    const home = env["HOME"] || homedir();
    return join(home, "Library", "Application Support", "airlock", "run", "airlockd.sock");
  }
  const tmp = env["TMPDIR"] || "/tmp";
  return join(tmp, `airlock-${uid()}`, "airlockd.sock");
}

function uid(): number {
  return typeof process.getuid === "function" ? process.getuid() : -1;
}

/** Whether a host name or address is loopback (localhost, 127.0.0.0/8, ::1, ::ffff:127.x.x.x), as the daemon and CLI judge it. */
export function isLoopback(host: string): boolean {
  if (host.toLowerCase() === "localhost") return true;
  const v = isIP(host);
  if (v === 4) return host.split(".")[0] === "127";
  if (v !== 6) return false;
  const b = ipv6Bytes(host);
  if (!b) return false;
  if (b.slice(0, 15).every((x) => x === 0) && b[15] === 1) return true;
  const mapped = b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;
  return mapped && b[12] === 127;
}

function ipv6Bytes(s: string): number[] | undefined {
  let head = s;
  const tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4 && v4[1]) {
    for (const p of v4[1].split(".")) tail.push(Number(p));
    head = s.slice(0, s.length - v4[1].length);
    if (head.endsWith(":") && !head.endsWith("::")) head = head.slice(0, -1);
  }
  const groups = (part: string): number[] =>
    part === "" ? [] : part.split(":").flatMap((g) => [(parseInt(g, 16) >> 8) & 0xff, parseInt(g, 16) & 0xff]);
  const [l, r] = head.split("::") as [string, string | undefined];
  const left = groups(l);
  const right = r === undefined ? [] : groups(r);
  const fill = 16 - tail.length - left.length - right.length;
  if (fill < 0 || (r === undefined && fill !== 0)) return undefined;
  return [...left, ...new Array<number>(fill).fill(0), ...right, ...tail];
}

/** An address split as a URL is (scheme, user, host, port, path), without the WHATWG rules that rewrite hosts. */
interface Parts {
  scheme: string;
  user: string;
  host: string;
  port: number | undefined;
  netloc: string;
  path: string;
}

function split(address: string): Parts {
  const i = address.indexOf("://");
  const scheme = i > 0 ? address.slice(0, i).toLowerCase() : "";
  if (!scheme || !/^[a-z][a-z0-9+.-]*$/.test(scheme)) {
    throw new TypeError(`"${address}": not a daemon address (${ADDRESSES})`);
  }
  const rest = address.slice(i + 3);
  if (rest.includes("?") || rest.includes("#")) {
    throw new TypeError(`"${address}": a daemon address has no query or fragment`);
  }
  const slash = rest.indexOf("/");
  const netloc = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? "" : rest.slice(slash);
  const at = netloc.lastIndexOf("@");
  const user = at < 0 ? "" : netloc.slice(0, at).split(":")[0] ?? "";
  const hostport = at < 0 ? netloc : netloc.slice(at + 1);
  let host: string;
  let portText: string;
  if (hostport.startsWith("[")) {
    const end = hostport.indexOf("]");
    if (end < 0) throw new TypeError(`"${address}": an IPv6 host without its "]"`);
    host = hostport.slice(1, end);
    const after = hostport.slice(end + 1);
    if (after && !after.startsWith(":")) throw new TypeError(`"${address}": a bad port`);
    portText = after.slice(1);
  } else {
    const c = hostport.indexOf(":");
    host = c < 0 ? hostport : hostport.slice(0, c);
    portText = c < 0 ? "" : hostport.slice(c + 1);
  }
  let port: number | undefined;
  if (portText !== "") {
    if (!/^[0-9]+$/.test(portText) || Number(portText) > 65535) {
      throw new TypeError(`"${address}": a bad port (${portText})`);
    }
    port = Number(portText);
  }
  return { scheme, user, host: host.toLowerCase(), port, netloc, path };
}

/** One endpoint of an address, before the client's options (token, TLS CA) are added. */
export type Endpoint =
  | { transport: "unix"; path: string }
  | { transport: "tcp"; host: string; port: number; tls: boolean; ca: string }
  | { transport: "ssh"; host: string; user: string; port: number | undefined };

/**
 * Parses a daemon address by the rule of the airlock CLI (and of every SDK):
 * `unix:///path` or an absolute path (a Unix socket); `tcp://host:port` (TLS
 * unless the host is loopback and no CA is given: AIRLOCK_TLS_CA); `https://`
 * (TLS); `http://` (plain, loopback only); `ssh://[user@]host[:port]`.
 * A bad address throws a TypeError before anything is sent.
 */
export function parseHost(address: string, env: Env = process.env): Endpoint {
  if (address.startsWith("/")) return { transport: "unix", path: address };
  const u = split(address);
  if (u.scheme === "unix") {
    if (u.netloc || !u.path.startsWith("/")) {
      throw new TypeError(`"${address}": a unix address needs an absolute path (unix:///path/to/airlockd.sock)`);
    }
    return { transport: "unix", path: u.path };
  }
  if (u.scheme === "tcp" || u.scheme === "http" || u.scheme === "https") {
    if (!u.host || !u.port || (u.path !== "" && u.path !== "/")) {
      throw new TypeError(`"${address}": a TCP address needs a host and a port (${u.scheme}://HOST:PORT)`);
    }
    if (u.scheme === "http") {
      if (!isLoopback(u.host)) {
        throw new TypeError(
          `"${address}": plain HTTP would send the token in clear off loopback; ` +
            `use https://${hostPort(u.host, u.port)} (or tcp://, TLS off loopback)`,
        );
      }
      return { transport: "tcp", host: u.host, port: u.port, tls: false, ca: "" };
    }
    const ca = env["AIRLOCK_TLS_CA"] ?? "";
    const tls = u.scheme === "https" || ca !== "" || !isLoopback(u.host);
    return { transport: "tcp", host: u.host, port: u.port, tls, ca: tls ? ca : "" };
  }
  if (u.scheme === "ssh") {
    if (!u.host) throw new TypeError(`"${address}": no host (ssh://[user@]host[:port])`);
    if (u.path !== "" && u.path !== "/") {
      throw new TypeError(`"${address}": an ssh address has no path (ssh://[user@]host[:port])`);
    }
    return { transport: "ssh", host: u.host, user: u.user, port: u.port };
  }
  throw new TypeError(`"${address}": not a daemon address (${ADDRESSES})`);
}

export function hostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** The options of a client that pick its daemon. */
export interface AddressOptions extends SSHSettings {
  /** The daemon's address; else $AIRLOCK_HOST, else the user's default Unix socket. */
  host?: string;
  /** The token of a TCP daemon; else $AIRLOCK_TOKEN. Never sent on a Unix socket or over ssh. */
  token?: string;
  /** A CA file to trust for TLS (makes tcp:// TLS even on loopback); else $AIRLOCK_TLS_CA, else the system's CAs. */
  tlsCa?: string;
}

/** Where and how a client with these options reaches its daemon, `env` filling the gaps (AIRLOCK_HOST, AIRLOCK_TOKEN, AIRLOCK_TLS_CA). */
export function resolveTarget(options: AddressOptions = {}, env: Env = process.env): Target {
  const named = options.host || env["AIRLOCK_HOST"] || "";
  const address = named || defaultSocket(env);
  const ep = parseHost(address, options.tlsCa ? { ...env, AIRLOCK_TLS_CA: options.tlsCa } : env);
  switch (ep.transport) {
    case "unix":
      return { transport: "unix", path: ep.path, checkRuntimeDir: !named };
    case "tcp": {
      const token = options.token ?? (env["AIRLOCK_TOKEN"] || undefined);
      return { ...ep, addr: hostPort(ep.host, ep.port), token };
    }
    case "ssh": {
      const argv = [...(options.sshCommand ?? ["ssh"]), "-T", ...(options.sshOptions ?? [])];
      if (ep.user) argv.push("-l", ep.user);
      if (ep.port) argv.push("-p", String(ep.port));
      argv.push("--", ep.host, ...(options.remoteCommand ?? ["airlock", "daemon", "dial-stdio"]));
      return { ...ep, argv };
    }
  }
}

/** The address of a target, for messages (never with its token). */
export function describeTarget(t: Target): string {
  switch (t.transport) {
    case "unix":
      return t.path;
    case "ssh":
      return `ssh://${t.user ? `${t.user}@` : ""}${t.host}${t.port ? `:${t.port}` : ""}`;
    case "tcp":
      return `${t.tls ? "https" : "http"}://${t.addr}`;
  }
}

function describeUid(id: number): string {
  try {
    if (id === uid()) return `uid ${id} (${userInfo().username})`;
  } catch {
    // no name
  }
  return `uid ${id}`;
}

/**
 * Checks the directory of the default socket (and the socket) as the airlock
 * CLI does before it talks to it: a real directory (not a symbolic link) of
 * the user's own with mode 0700, and the socket in it the user's (or root's).
 * In a directory another local user made first (/tmp/airlock-<uid>) the
 * "daemon" answering could be theirs: UnsafeRuntimeDirError, and nothing is
 * sent. A directory that does not exist is DaemonUnreachableError.
 */
export function checkRuntimeDir(socketPath: string): void {
  const d = dirname(socketPath);
  const me = uid();
  const hint =
    "set XDG_RUNTIME_DIR to a private directory of yours (`mkdir -m 0700 -p ~/.airlock-run && export " +
    "XDG_RUNTIME_DIR=~/.airlock-run`, or /run/user/<uid> where the login manager made one), or have " +
    `${d} removed (its owner or root can)`;
  const refuse = (what: string, problem: string): UnsafeRuntimeDirError =>
    new UnsafeRuntimeDirError(
      `refusing to use ${what}: it ${problem}; airlock uses only a real directory of your own with mode 0700 ` +
        `and a socket of yours in it: ${hint}`,
      what,
    );
  const ownedBy = (owner: number): string => (owner !== me ? ` owned by ${describeUid(owner)}` : "");
  let st;
  try {
    st = lstatSync(d);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") {
      throw new DaemonUnreachableError(
        `cannot reach the airlock daemon at ${socketPath}: ${d} does not exist (no daemon runs: \`airlock daemon start\`)`,
      );
    }
    throw new DaemonUnreachableError(`cannot examine ${d}: ${(e as Error).message}`);
  }
  if (st.isSymbolicLink()) {
    let target = "?";
    try {
      target = readlinkSync(d);
    } catch {
      // keep "?"
    }
    throw refuse(d, `is a symbolic link (to ${target})${ownedBy(st.uid)}`);
  }
  if (!st.isDirectory()) throw refuse(d, `is not a directory${ownedBy(st.uid)}`);
  if (st.uid !== me) throw refuse(d, `belongs to ${describeUid(st.uid)}, not to you (${describeUid(me)})`);
  const mode = st.mode & 0o7777;
  if (mode !== 0o700) throw refuse(d, `has mode ${mode.toString(8).padStart(4, "0")}, not 0700`);
  let sst;
  try {
    sst = lstatSync(socketPath);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return; // no daemon: connecting says so
    throw new DaemonUnreachableError(`cannot examine ${socketPath}: ${(e as Error).message}`);
  }
  if (!sst.isSocket()) throw refuse(socketPath, `is not a socket${ownedBy(sst.uid)}`);
  if (sst.uid !== me && sst.uid !== 0) {
    throw refuse(socketPath, `belongs to ${describeUid(sst.uid)}, not to you (${describeUid(me)})`);
  }
}
