// airlock's TypeScript SDK: drive sandboxes through the control daemon's API
// (docs/sdk.md). No dependencies beyond Node's own modules.
export { Client, Exec, Sandbox } from "./client.js";
export type { ClientOptions, ClientRunOptions, CreateOptions, ExecOptions, RunOptions } from "./client.js";
export { EventStream, ExecOutput, ExecStream } from "./streams.js";
export { ExecResult } from "./models.js";
export type {
  Command,
  EnvVars,
  Event,
  ExecFrame,
  ExecInfo,
  FileEntry,
  Health,
  Manifest,
  Pool,
  PoolList,
  PooledSandbox,
  PruneResult,
  SandboxInfo,
  SandboxState,
  SnapshotImage,
  SnapshotInfo,
} from "./models.js";
export { checkRuntimeDir, defaultSocket, describeTarget, isLoopback, parseHost, resolveTarget } from "./address.js";
export type { AddressOptions, Endpoint, Env, SSHSettings, Target } from "./address.js";
export * from "./errors.js";
export type * as api from "./api.js";
