// What the tests share: the daemon the Go driver (sdk_test.go) started, and
// clients of it. The driver sets AIRLOCK_TEST_*; without them the tests that
// need a daemon fail, saying so.
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, type ClientOptions, type CreateOptions, type Sandbox } from "../src/index.js";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the suite with go test ./sdk/typescript, which starts a daemon`);
  return v;
}

export const daemon = {
  get socket(): string {
    return need("AIRLOCK_TEST_SOCKET");
  },
  get runtimeDir(): string {
    return need("AIRLOCK_TEST_RUNTIME_DIR");
  },
  get tcp(): string {
    return need("AIRLOCK_TEST_TCP");
  },
  get token(): string {
    return need("AIRLOCK_TEST_TOKEN");
  },
  get image(): string {
    return need("AIRLOCK_TEST_IMAGE");
  },
  get project(): string {
    return need("AIRLOCK_TEST_PROJECT");
  },
  get binary(): string {
    return need("AIRLOCK_BINARY");
  },
  /** The environment of the daemon's user (HOME, XDG_*), as KEY=VALUE strings. */
  get env(): string[] {
    return JSON.parse(need("AIRLOCK_TEST_DAEMON_ENV")) as string[];
  },
};

/** The SDK's source folder (sdk/typescript) and the repository around it. */
export const sdkSource = process.env["AIRLOCK_SDK_SOURCE"] ?? join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const repoRoot = join(sdkSource, "..", "..");

/** A client of the test daemon's socket. */
export function client(options: ClientOptions = {}): Client {
  return new Client({ host: daemon.socket, timeout: 60, ...options });
}

/**
 * A manifest of the busybox test image, with no network: the driver's own
 * text (AIRLOCK_TEST_MANIFEST), whose warm pool it filled, when nothing is added.
 */
export function manifest(extra = ""): string {
  const base = process.env["AIRLOCK_TEST_MANIFEST"] ?? `[sandbox]\nimage = "${daemon.image}"\nnetwork = "none"\n`;
  return (base.endsWith("\n") ? base : `${base}\n`) + extra;
}

/** A unique ID for a test's sandbox or exec. */
export function uid(prefix = "ts"): string {
  return `${prefix}-${randomUUID().slice(0, 12)}`;
}

/** Runs fn with a new sandbox (from the warm pool unless options say otherwise), deleted afterwards whatever happened. */
export async function withSandbox<T>(fn: (sb: Sandbox, c: Client) => Promise<T>, options: CreateOptions = {}, c = client()): Promise<T> {
  const sb = await c.create(manifest(), { labels: { suite: "sdk-ts" }, ...options });
  try {
    return await fn(sb, c);
  } finally {
    await sb.delete();
  }
}
