"""The errors of the SDK: one hierarchy under :class:`AirlockError`.

An error answer of the daemon (a 4xx or 5xx status with a JSON body
``{"reason": ..., "message": ...}``, see docs/api.md "Errors") becomes the
subclass for its reason, e.g. ``sandbox_not_found`` → :class:`SandboxNotFoundError`
(a :class:`NotFoundError`). A reason this SDK does not know becomes the class of
its status (:class:`NotFoundError` for 404, :class:`ServerError` for 5xx, …), or
:class:`AirlockError` itself. Errors that do not come from an HTTP answer
(the daemon cannot be reached, a sandbox failed while being waited for, a wait
timed out) have ``status`` ``None``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "AirlockError",
    "DaemonUnreachableError",
    "UnsafeRuntimeDirError",
    "ProtocolError",
    "BadRequestError",
    "InvalidRequestError",
    "InvalidIDError",
    "BadCursorError",
    "ConfigError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "SandboxNotFoundError",
    "ExecNotFoundError",
    "PathNotFoundError",
    "NotAFileError",
    "ConflictError",
    "InvalidStateError",
    "IDAlreadyUsedError",
    "TooLargeError",
    "TooManyWatchesError",
    "PathExistsError",
    "DirectoryNotEmptyError",
    "PermissionDeniedError",
    "ServerError",
    "EngineError",
    "InternalError",
    "NotSupportedError",
    "SandboxFailedError",
    "WaitTimeoutError",
    "CommandFailedError",
    "error_from_response",
]


class AirlockError(Exception):
    """Any error of the SDK.

    Attributes:
        status: The HTTP status of the daemon's answer, or ``None`` when the
            error did not come from an answer.
        reason: A stable, machine-readable word: the daemon's reason
            (``sandbox_not_found``, ``invalid_state``, …) or one of the SDK's
            own (``unreachable``, ``protocol``, ``sandbox_failed``, ``timeout``,
            ``command_failed``).
        message: For a person; it may change between versions.
    """

    #: The reason of errors of this class when none is given.
    default_reason: str = "internal"

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status: int | None = status
        self.reason: str = reason or self.default_reason
        self.message: str = message

    def __str__(self) -> str:
        if self.status is not None:
            return f"{self.message} ({self.reason}, HTTP {self.status})"
        return f"{self.message} ({self.reason})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, reason={self.reason!r}, message={self.message!r})"


class DaemonUnreachableError(AirlockError):
    """The daemon could not be reached (no socket, connection refused, ssh failed)."""

    default_reason = "unreachable"


class UnsafeRuntimeDirError(DaemonUnreachableError):
    """The default socket's directory (or the socket) is not the user's own: refused, as the airlock CLI refuses it.

    Another local user could have made ``/tmp/airlock-<uid>`` first and listen
    there; the SDK then sends nothing. ``path`` is what was refused.
    """

    default_reason = "unsafe_runtime_dir"

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path: str = path


class ProtocolError(AirlockError):
    """The daemon answered something this SDK cannot read (not JSON, a stream cut short)."""

    default_reason = "protocol"


class BadRequestError(AirlockError):
    """400: the request was refused as malformed."""

    default_reason = "invalid_request"


class InvalidRequestError(BadRequestError):
    """400 ``invalid_request``: a body that does not decode, a bad query."""


class InvalidIDError(BadRequestError):
    """400 ``invalid_id``: an ID that does not match the pattern of docs/api.md "IDs"."""

    default_reason = "invalid_id"


class BadCursorError(BadRequestError):
    """400 ``bad_cursor``: an events cursor that is no sequence or is beyond the last one."""

    default_reason = "bad_cursor"


class ConfigError(BadRequestError):
    """400 ``config_error``: the manifest is invalid (the rules of ``airlock validate``)."""

    default_reason = "config_error"


class UnauthorizedError(AirlockError):
    """401 ``unauthorized``: on TCP, no token or a wrong one."""

    default_reason = "unauthorized"


class ForbiddenError(AirlockError):
    """403 ``forbidden``: on TCP, a request shaped like a browser's (an
    ``Origin`` header, a ``Host`` that is not the listen address)."""

    default_reason = "forbidden"


class NotFoundError(AirlockError):
    """404: something named in the request does not exist."""

    default_reason = "not_found"


class SandboxNotFoundError(NotFoundError):
    """404 ``sandbox_not_found``: no such sandbox, or it was deleted."""

    default_reason = "sandbox_not_found"


class ExecNotFoundError(NotFoundError):
    """404 ``exec_not_found``: no such exec in that sandbox."""

    default_reason = "exec_not_found"


class PathNotFoundError(NotFoundError):
    """404 ``path_not_found``: no such path in the sandbox."""

    default_reason = "path_not_found"


class NotAFileError(AirlockError):
    """406 ``not_a_file``: a path read as one file is a directory, a link, …"""

    default_reason = "not_a_file"


class ConflictError(AirlockError):
    """409: the request conflicts with the sandbox's state or history."""

    default_reason = "conflict"


class InvalidStateError(ConflictError):
    """409 ``invalid_state``: the sandbox's state does not allow the request."""

    default_reason = "invalid_state"


class IDAlreadyUsedError(ConflictError):
    """409 ``id_already_used``: the ID was used before (IDs are reserved forever)."""

    default_reason = "id_already_used"


class PathExistsError(ConflictError):
    """409 ``already_exists``: a directory made, or a path renamed, where a path exists."""

    default_reason = "already_exists"


class DirectoryNotEmptyError(ConflictError):
    """409 ``not_empty``: a directory that holds entries, removed without ``recursive`` (or replaced)."""

    default_reason = "not_empty"


class PermissionDeniedError(ForbiddenError):
    """403 ``permission_denied``: the sandbox's user may not do that to the path."""

    default_reason = "permission_denied"


class TooLargeError(AirlockError):
    """413 ``too_large``: a file, archive or body over the daemon's ``artifacts.output_max``."""

    default_reason = "too_large"


class TooManyWatchesError(AirlockError):
    """429 ``too_many_watches``: a watch of a sandbox that has as many open as it may (8); close one first."""

    default_reason = "too_many_watches"


class ServerError(AirlockError):
    """5xx: the daemon or the Docker Engine failed."""

    default_reason = "internal"


class EngineError(ServerError):
    """500 ``engine_error``: the Docker Engine failed."""

    default_reason = "engine_error"


class InternalError(ServerError):
    """500 ``internal``: the daemon failed."""


class NotSupportedError(AirlockError):
    """501: the sandbox's backend does not have the operation (a pause on Kubernetes); retrying does not help."""

    default_reason = "not_supported"


class SandboxFailedError(AirlockError):
    """A sandbox that was being waited for failed, was stopped or was deleted.

    ``reason`` is ``sandbox_failed``; ``sandbox_reason`` is the reason the daemon
    gave in the event (e.g. why the image could not be pulled), ``state`` the
    sandbox's state then, ``sandbox_id`` the sandbox.
    """

    default_reason = "sandbox_failed"

    def __init__(self, message: str, *, sandbox_id: str, state: str, sandbox_reason: str = "") -> None:
        super().__init__(message)
        self.sandbox_id: str = sandbox_id
        self.state: str = state
        self.sandbox_reason: str = sandbox_reason


class WaitTimeoutError(AirlockError, TimeoutError):
    """A wait (for a sandbox to be ready, stopped, deleted) took longer than its timeout."""

    default_reason = "timeout"


class CommandFailedError(AirlockError):
    """A command ended with a non-zero exit code (raised by ``ExecResult.check``).

    ``result`` is the :class:`airlock.ExecResult`, with the output.
    """

    default_reason = "command_failed"

    def __init__(self, message: str, *, result: Any) -> None:
        super().__init__(message)
        self.result = result
        self.exit_code: int = result.exit_code


_BY_REASON: dict[str, type[AirlockError]] = {
    "invalid_request": InvalidRequestError,
    "invalid_id": InvalidIDError,
    "bad_cursor": BadCursorError,
    "config_error": ConfigError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "sandbox_not_found": SandboxNotFoundError,
    "exec_not_found": ExecNotFoundError,
    "path_not_found": PathNotFoundError,
    "not_a_file": NotAFileError,
    "invalid_state": InvalidStateError,
    "id_already_used": IDAlreadyUsedError,
    "too_large": TooLargeError,
    "too_many_watches": TooManyWatchesError,
    "already_exists": PathExistsError,
    "not_empty": DirectoryNotEmptyError,
    "permission_denied": PermissionDeniedError,
    "engine_error": EngineError,
    "internal": InternalError,
    "not_supported": NotSupportedError,
}

_BY_STATUS: dict[int, type[AirlockError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    406: NotAFileError,
    409: ConflictError,
    413: TooLargeError,
    429: TooManyWatchesError,
}


def error_from_response(status: int, body: bytes) -> AirlockError:
    """Returns the error for an answer with an error status and its body.

    The body is the daemon's ``{"reason", "message"}``; anything else (a proxy's
    page, an empty body) gives the class of the status with the body's text as
    the message and reason ``internal``.
    """
    reason, message = "", ""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict):
            reason = str(doc.get("reason") or "")
            message = str(doc.get("message") or "")
    except ValueError:
        pass
    cls: type[AirlockError] | None = None
    if reason:
        cls = _BY_REASON.get(reason)
    else:
        message = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
        reason = "internal"
    cls = cls or _BY_STATUS.get(status) or (ServerError if status >= 500 else AirlockError)
    return cls(message, status=status, reason=reason)
