// The errors of the SDK: one hierarchy under AirlockError.
//
// An error answer of the daemon (a 4xx or 5xx status with a JSON body
// {"reason", "message"}, docs/api.md "Errors") becomes the class of its reason,
// e.g. sandbox_not_found -> SandboxNotFoundError (a NotFoundError). A reason
// this SDK does not know gets the class of its status. Errors that are not an
// answer of the daemon (unreachable, a failed wait, a timeout) have status
// undefined.

/** Any error of the SDK: `status` (the HTTP status, or undefined), `reason` (stable, for programs), `message` (for people). */
export class AirlockError extends Error {
  static readonly defaultReason: string = "internal";
  readonly status: number | undefined;
  readonly reason: string;

  constructor(message: string, options: { status?: number; reason?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = options.status;
    this.reason = options.reason ?? (new.target as typeof AirlockError).defaultReason;
  }
}

/** The daemon could not be reached: no socket, refused, ssh failed. */
export class DaemonUnreachableError extends AirlockError {
  static override readonly defaultReason: string = "unreachable";
}

/** The default socket's directory (or the socket) is not the user's own with mode 0700: nothing was sent. `path` is what was refused. */
export class UnsafeRuntimeDirError extends DaemonUnreachableError {
  static override readonly defaultReason: string = "unsafe_runtime_dir";
  readonly path: string;
  constructor(message: string, path: string) {
    super(message);
    this.path = path;
  }
}

/** An answer this SDK cannot read (not JSON, a stream cut short). */
export class ProtocolError extends AirlockError {
  static override readonly defaultReason: string = "protocol";
}

/** 400. */
export class BadRequestError extends AirlockError {
  static override readonly defaultReason: string = "invalid_request";
}
/** 400 invalid_request: a body that does not decode, a bad query. */
export class InvalidRequestError extends BadRequestError {}
/** 400 invalid_id. */
export class InvalidIDError extends BadRequestError {
  static override readonly defaultReason: string = "invalid_id";
}
/** 400 bad_cursor: an events cursor past the end. */
export class BadCursorError extends BadRequestError {
  static override readonly defaultReason: string = "bad_cursor";
}
/** 400 config_error: a manifest that does not resolve. */
export class ConfigError extends BadRequestError {
  static override readonly defaultReason: string = "config_error";
}
/** 401: no token, or a wrong one. */
export class UnauthorizedError extends AirlockError {
  static override readonly defaultReason: string = "unauthorized";
}
/** 403. */
export class ForbiddenError extends AirlockError {
  static override readonly defaultReason: string = "forbidden";
}
/** 403 permission_denied: the sandbox's user may not do that to a path. */
export class PermissionDeniedError extends ForbiddenError {
  static override readonly defaultReason: string = "permission_denied";
}
/** 404. */
export class NotFoundError extends AirlockError {
  static override readonly defaultReason: string = "not_found";
}
/** 404 sandbox_not_found. */
export class SandboxNotFoundError extends NotFoundError {
  static override readonly defaultReason: string = "sandbox_not_found";
}
/** 404 exec_not_found. */
export class ExecNotFoundError extends NotFoundError {
  static override readonly defaultReason: string = "exec_not_found";
}
/** 404 path_not_found. */
export class PathNotFoundError extends NotFoundError {
  static override readonly defaultReason: string = "path_not_found";
}
/** 404 snapshot_not_found. */
export class SnapshotNotFoundError extends NotFoundError {
  static override readonly defaultReason: string = "snapshot_not_found";
}
/** 406 not_a_file: a directory read as a file. */
export class NotAFileError extends AirlockError {
  static override readonly defaultReason: string = "not_a_file";
}
/** 409. */
export class ConflictError extends AirlockError {
  static override readonly defaultReason: string = "conflict";
}
/** 409 invalid_state: not in a state that allows it (paused, stopped, an exec that ended). */
export class InvalidStateError extends ConflictError {
  static override readonly defaultReason: string = "invalid_state";
}
/** 409 id_already_used: IDs are reserved forever. */
export class IDAlreadyUsedError extends ConflictError {
  static override readonly defaultReason: string = "id_already_used";
}
/** 409 already_exists. */
export class PathExistsError extends ConflictError {
  static override readonly defaultReason: string = "already_exists";
}
/** 409 not_empty. */
export class DirectoryNotEmptyError extends ConflictError {
  static override readonly defaultReason: string = "not_empty";
}
/** 413 too_large. */
export class TooLargeError extends AirlockError {
  static override readonly defaultReason: string = "too_large";
}
/** 429 too_many_watches. */
export class TooManyWatchesError extends AirlockError {
  static override readonly defaultReason: string = "too_many_watches";
}
/** 5xx. */
export class ServerError extends AirlockError {}
/** 5xx engine_error: the Docker Engine (or cluster) refused. */
export class EngineError extends ServerError {
  static override readonly defaultReason: string = "engine_error";
}
/** 500 internal. */
export class InternalError extends ServerError {}
/** 501 not_supported: the sandbox's backend does not have the operation. */
export class NotSupportedError extends AirlockError {
  static override readonly defaultReason: string = "not_supported";
}

/** A sandbox failed, stopped or was deleted while waited for; `sandboxReason` is the daemon's reason. */
export class SandboxFailedError extends AirlockError {
  static override readonly defaultReason: string = "sandbox_failed";
  readonly sandboxId: string;
  readonly state: string;
  readonly sandboxReason: string;
  constructor(message: string, o: { sandboxId: string; state: string; sandboxReason?: string }) {
    super(message);
    this.sandboxId = o.sandboxId;
    this.state = o.state;
    this.sandboxReason = o.sandboxReason ?? "";
  }
}

/** A wait that took longer than its timeout. */
export class WaitTimeoutError extends AirlockError {
  static override readonly defaultReason: string = "timeout";
}

/** A command that exited non-zero where success was required (`check`); `result` holds its output. */
export class CommandFailedError extends AirlockError {
  static override readonly defaultReason: string = "command_failed";
  readonly exitCode: number;
  readonly result: { exitCode: number; stdout: Buffer; stderr: Buffer };
  constructor(message: string, result: { exitCode: number; stdout: Buffer; stderr: Buffer }) {
    super(message);
    this.result = result;
    this.exitCode = result.exitCode;
  }
}

type ErrorClass = new (message: string, options?: { status?: number; reason?: string }) => AirlockError;

const byReason: Record<string, ErrorClass> = {
  invalid_request: InvalidRequestError,
  invalid_id: InvalidIDError,
  bad_cursor: BadCursorError,
  config_error: ConfigError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  sandbox_not_found: SandboxNotFoundError,
  exec_not_found: ExecNotFoundError,
  path_not_found: PathNotFoundError,
  snapshot_not_found: SnapshotNotFoundError,
  not_a_file: NotAFileError,
  invalid_state: InvalidStateError,
  id_already_used: IDAlreadyUsedError,
  too_large: TooLargeError,
  too_many_watches: TooManyWatchesError,
  already_exists: PathExistsError,
  not_empty: DirectoryNotEmptyError,
  permission_denied: PermissionDeniedError,
  engine_error: EngineError,
  internal: InternalError,
  not_supported: NotSupportedError,
};

const byStatus: Record<number, ErrorClass> = {
  400: BadRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  406: NotAFileError,
  409: ConflictError,
  413: TooLargeError,
  429: TooManyWatchesError,
  501: NotSupportedError,
};

/** The error of an answer with an error status and its body (the daemon's {"reason", "message"}, or anything else). */
export function errorFromResponse(status: number, body: Buffer): AirlockError {
  let reason = "";
  let message = "";
  try {
    const doc: unknown = JSON.parse(body.toString("utf8"));
    if (doc && typeof doc === "object") {
      const d = doc as Record<string, unknown>;
      reason = typeof d["reason"] === "string" ? d["reason"] : "";
      message = typeof d["message"] === "string" ? d["message"] : "";
    }
  } catch {
    // not JSON: the body's text below
  }
  let cls: ErrorClass | undefined;
  if (reason) {
    cls = byReason[reason];
  } else {
    message = body.toString("utf8").trim() || `HTTP ${status}`;
    reason = "internal";
  }
  cls ??= byStatus[status] ?? (status >= 500 ? ServerError : AirlockError);
  return new cls(message, { status, reason });
}
