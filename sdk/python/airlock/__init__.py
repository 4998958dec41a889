"""airlock: a Python client of the airlock control daemon.

Create a Docker sandbox from a sandbox.toml (text or a dict), run commands in
it, stream an exec, write and read files, follow its events, stop and delete
it — all through the daemon's HTTP API (docs/api.md), standard library only::

    import airlock

    manifest = '''
    [sandbox]
    image = "debian:12"
    '''
    with airlock.Client().create(manifest) as sb:
        sb.write_file("/tmp/job.sh", "echo 6 x 7 = $((6 * 7))\\n", mode=0o755)
        print(sb.run(["/tmp/job.sh"]).stdout_text)

The same for asyncio: :class:`airlock.aio.AsyncClient` (also ``airlock.AsyncClient``),
its methods awaited, its streams async iterators.

The guide: docs/sdk.md in the airlock repository.
"""

from typing import TYPE_CHECKING, Any

from ._files import AsyncFileWatch, FileEntry, FileEvent, FileWatch
from ._transport import Endpoint, default_socket, parse_host
from .client import Client, Command, EventStream, Exec, ExecOutput, ExecStream, Manifest, Pty, Sandbox
from . import errors as _errors
from .errors import *  # noqa: F403 (the error classes, errors.__all__)
from ._snapshots import SnapshotImage, SnapshotInfo
from .models import (DaemonCount, Event, ExecFrame, ExecInfo, ExecResult, Health, Pool, PooledSandbox, PoolList, Port,
                     SandboxInfo)

if TYPE_CHECKING:
    from .aio import AsyncClient, AsyncEventStream, AsyncExec, AsyncExecOutput, AsyncExecStream, AsyncPty, AsyncSandbox

__version__ = "0.1.0"

#: Names of airlock.aio, imported (with asyncio) on first use.
_AIO = ("AsyncClient", "AsyncSandbox", "AsyncEventStream", "AsyncExecStream", "AsyncExec", "AsyncExecOutput", "AsyncPty")


def __getattr__(name: str) -> Any:
    if name in _AIO:
        from . import aio

        return getattr(aio, name)
    raise AttributeError(f"module 'airlock' has no attribute {name!r}")


__all__ = [
    "Client",
    "Sandbox",
    "EventStream",
    "ExecStream",
    "Exec",
    "ExecOutput",
    "AsyncClient",
    "AsyncSandbox",
    "AsyncEventStream",
    "AsyncExecStream",
    "AsyncExec",
    "AsyncExecOutput",
    "Pty",
    "AsyncPty",
    "Command",
    "Manifest",
    "Endpoint",
    "default_socket",
    "parse_host",
    "Health",
    "SandboxInfo",
    "DaemonCount",
    "Port",
    "Event",
    "ExecInfo",
    "ExecFrame",
    "ExecResult",
    "Pool",
    "PooledSandbox",
    "PoolList",
    "SnapshotInfo",
    "SnapshotImage",
    "FileEntry",
    "FileEvent",
    "FileWatch",
    "AsyncFileWatch",
]
__all__ += [n for n in _errors.__all__ if n != "error_from_response"]
