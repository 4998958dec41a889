// What the SDK returns: the daemon's records as the API sends them (api.ts,
// generated from control/openapi.json: snake_case, as on the wire) and the
// SDK's own values (camelCase).
import type * as api from "./api.js";
import { CommandFailedError } from "./errors.js";

/** A sandbox's record (GET /v1/sandboxes/{id}). */
export type SandboxInfo = api.Sandbox;
/** A sandbox's state. */
export type SandboxState = api.Sandbox["state"];
/** One entry of a sandbox's history. */
export type Event = api.Event;
/** An exec's record. */
export type ExecInfo = api.Exec;
/** GET /v1/health. */
export type Health = api.Health;
/** GET /v1/pools. */
export type PoolList = api.PoolList;
/** One warm pool. */
export type Pool = api.Pool;
/** One sandbox of a warm pool. */
export type PooledSandbox = api.PooledSandbox;
/** A snapshot the daemon holds. */
export type SnapshotInfo = api.Snapshot;
/** The image of one container of a snapshot. */
export type SnapshotImage = api.SnapshotImage;
/** One entry of a listing, or a stat. */
export type FileEntry = api.FileEntry;
/** What POST /v1/prune removed (or would remove). */
export type PruneResult = api.PruneResult;

/** A command: a list of arguments, or one string run by `sh -c`. */
export type Command = string | readonly string[];

/** A manifest: the text of a sandbox.toml, an object of the same structure, or a file: URL of a sandbox.toml. */
export type Manifest = string | Record<string, unknown> | URL;

/** Variables: a record, or "NAME=VALUE" strings. */
export type EnvVars = Record<string, string> | readonly string[];

/** One frame of a streamed exec: first `exec` (the record), then output (`stream`, `data`), last `exitCode`. */
export interface ExecFrame {
  exec?: ExecInfo;
  stream?: "stdout" | "stderr";
  data?: Buffer;
  exitCode?: number;
}

/** What a finished command gave: its exit code and whole output. */
export class ExecResult {
  readonly exitCode: number;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  /** The exec's ID (Sandbox.run), "" for a run sandbox's main command. */
  readonly execId: string;
  /** The run sandbox whose main command it was (Client.run), else "". */
  readonly sandboxId: string;

  constructor(o: { exitCode: number; stdout: Buffer; stderr: Buffer; execId?: string; sandboxId?: string }) {
    this.exitCode = o.exitCode;
    this.stdout = o.stdout;
    this.stderr = o.stderr;
    this.execId = o.execId ?? "";
    this.sandboxId = o.sandboxId ?? "";
  }

  /** stdout as text (UTF-8, invalid bytes replaced). */
  get stdoutText(): string {
    return this.stdout.toString("utf8");
  }

  /** stderr as text (UTF-8, invalid bytes replaced). */
  get stderrText(): string {
    return this.stderr.toString("utf8");
  }

  /** Whether the exit code is 0. */
  get ok(): boolean {
    return this.exitCode === 0;
  }

  /** This result when the exit code is 0, else throws CommandFailedError. */
  check(): this {
    if (this.exitCode !== 0) {
      const tail = this.stderrText.trim().split("\n").filter(Boolean).slice(-3);
      let msg = `the command exited with code ${this.exitCode}`;
      if (tail.length) msg += `: ${tail.join(" | ")}`;
      throw new CommandFailedError(msg, this);
    }
    return this;
  }
}
