"""A sandbox's files beyond read and write: list, stat, remove, mkdir, rename, download_dir, watch (docs/api.md, Files).

Paths are ``str`` (or ``bytes``, or a path-like): a name that is not UTF-8 in
the sandbox comes back decoded as :func:`os.fsdecode` decodes it (each
invalid byte a surrogate escape), and such a ``str`` given back names the same
bytes (:func:`os.fsencode`), so a name read from a listing always names its file.
"""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from ._ops import Flow, Offload, fetch
from ._wire import Request, decode_json, sandbox_path
from .errors import ConflictError, PathNotFoundError, ProtocolError, WaitTimeoutError

if TYPE_CHECKING:
    from ._aiotransport import AsyncResponse
    from ._transport import Response
    from .aio import AsyncClient
    from .client import Client

__all__ = ["FileEntry", "FileEvent", "FileWatch", "AsyncFileWatch", "FilesMixin", "AsyncFilesMixin"]

#: A path in the sandbox: text, bytes, or a path-like object.
SandboxPath = Union[str, bytes, "os.PathLike[str]"]


def _query(*pairs: tuple[str, Any]) -> list[tuple[str, str]]:
    """A query. A path goes as its bytes (percent-encoded), so any name can be given: as a str whose
    invalid bytes are surrogate escapes (os.fsdecode), which the request line encodes back to them."""
    items: list[tuple[str, str]] = []
    for k, v in pairs:
        if v is None or v is False:
            continue
        if v is True:
            v = "true"
        elif isinstance(v, int):
            v = str(v)
        elif not isinstance(v, str) or k in ("path", "from", "to"):
            v = os.fsdecode(os.fsencode(v))
        items.append((k, v))
    return items


def _name(d: dict[str, Any], key: str) -> str:
    """A name of the daemon's JSON: its exact bytes when it sent them (key_base64), as os.fsdecode decodes them."""
    b64 = d.get(key + "_base64")
    if isinstance(b64, str) and b64:
        return os.fsdecode(base64.b64decode(b64))
    v = d.get(key)
    return v if isinstance(v, str) else ""


@dataclass(frozen=True)
class FileEntry:
    """One file of a sandbox as lstat sees it (``GET …/files/stat``, an entry of ``…/files/list``).

    ``type`` is ``file``, ``dir``, ``symlink``, ``fifo``, ``socket``,
    ``char_device`` or ``block_device``; ``mode`` the permission bits with
    set-user-ID, set-group-ID and sticky (``0o644``); ``mtime`` the daemon's
    RFC 3339 time; ``link_target`` a symbolic link's target (``""`` otherwise).
    """

    name: str
    path: str
    type: str
    size: int
    mode: int
    mtime: str
    uid: int
    gid: int
    link_target: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @property
    def is_symlink(self) -> bool:
        return self.type == "symlink"

    @property
    def name_bytes(self) -> bytes:
        """The name's exact bytes."""
        return os.fsencode(self.name)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FileEntry:
        """Reads the daemon's JSON."""
        try:
            mode = int(str(d.get("mode") or "0"), 8)
        except ValueError:
            mode = 0
        return cls(name=_name(d, "name"), path=_name(d, "path"), type=str(d.get("type") or ""), size=int(d.get("size") or 0),
                   mode=mode, mtime=str(d.get("mtime") or ""), uid=int(d.get("uid") or 0), gid=int(d.get("gid") or 0),
                   link_target=_name(d, "link_target"), raw=d)


@dataclass(frozen=True)
class FileEvent:
    """A change under a watched directory (``GET …/files/watch``).

    ``type`` is ``created``, ``modified``, ``removed``, ``overflow`` (events
    were lost: ``reason`` says which bound, ``dropped`` how many in that
    second) or ``error`` (the watch failed and ends; ``reason`` says why).
    ``dir`` says the path is a directory.
    """

    type: str
    path: str = ""
    dir: bool = False
    reason: str = ""
    dropped: int = 0
    watched: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FileEvent:
        """Reads the daemon's JSON."""
        return cls(type=str(d.get("type") or ""), path=_name(d, "path"), dir=bool(d.get("dir")),
                   reason=str(d.get("reason") or ""), dropped=int(d.get("dropped") or 0),
                   watched=int(d.get("watched") or 0), raw=d)


class WatchCursor:
    """Reads a watch's server-sent events: each ``data:`` line is a :class:`FileEvent`; the rest is left out."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._deadline: float | None = None

    def start(self) -> float | None:
        """Starts the wait for one event: the time left for it."""
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout
        return self.time_left()

    def time_left(self) -> float | None:
        if self._deadline is None:
            return None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        return left

    def take(self, line: bytes) -> FileEvent | None:
        if not line.startswith(b"data: "):
            return None  # a blank line, a keep-alive comment
        try:
            return FileEvent.from_json(json.loads(line[6:]))
        except ValueError as e:
            raise ProtocolError(f"a watch event that is not JSON: {line[:200]!r}") from e

    def timed_out(self) -> WaitTimeoutError:
        return WaitTimeoutError(f"no change within {self.timeout} s")

    @staticmethod
    def not_ready(ev: FileEvent | None) -> ProtocolError:
        return ProtocolError(f"the watch did not start with a ready event: {ev!r}")


class FileWatch:
    """The changes under a directory of a sandbox, as the daemon sends them: iterate for :class:`FileEvent`.

    Made by :meth:`Sandbox.watch`, which returns once the watches are set
    (``watched`` says how many directories): what changes from then on is
    reported. Iteration ends when the directory is removed (after its
    ``removed`` event) or the watch failed (after an ``error`` event). Close
    it (or leave a ``with`` block) when done: the watcher in the sandbox ends
    with the connection. Each event is waited for at most ``timeout`` seconds
    (:class:`WaitTimeoutError`), without limit when ``None``.
    """

    def __init__(self, resp: Response, *, timeout: float | None = None) -> None:
        self._resp: Response | None = resp
        self._cursor = WatchCursor(timeout)
        #: How many directories are watched.
        self.watched: int = 0
        ready = self._next()
        if ready is None or ready.type != "ready":
            self.close()
            raise self._cursor.not_ready(ready)
        self.watched = ready.watched

    def __iter__(self) -> Iterator[FileEvent]:
        return self

    def __next__(self) -> FileEvent:
        ev = self._next()
        if ev is None:
            raise StopIteration
        return ev

    def _next(self) -> FileEvent | None:
        self._cursor.start()
        while self._resp is not None:
            try:
                self._resp.set_timeout(self._cursor.time_left())
                line = self._resp.readline()
            except TimeoutError as e:
                if isinstance(e, WaitTimeoutError):
                    raise
                raise self._cursor.timed_out() from e
            except OSError as e:
                self.close()
                raise ProtocolError(f"the watch broke: {e}") from e
            if not line:
                break
            ev = self._cursor.take(line)
            if ev is not None:
                return ev
        self.close()
        return None

    def close(self) -> None:
        """Ends the watch (and the watcher in the sandbox)."""
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncFileWatch:
    """:class:`FileWatch` for asyncio: ``async for ev in watch``, ``async with``."""

    def __init__(self, resp: AsyncResponse, *, timeout: float | None = None) -> None:
        self._resp: AsyncResponse | None = resp
        self._cursor = WatchCursor(timeout)
        #: How many directories are watched.
        self.watched: int = 0

    async def _ready(self) -> AsyncFileWatch:
        ready = await self._next()
        if ready is None or ready.type != "ready":
            await self.close()
            raise self._cursor.not_ready(ready)
        self.watched = ready.watched
        return self

    def __aiter__(self) -> AsyncFileWatch:
        return self

    async def __anext__(self) -> FileEvent:
        ev = await self._next()
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def _next(self) -> FileEvent | None:
        self._cursor.start()
        while self._resp is not None:
            try:
                self._resp.set_timeout(self._cursor.time_left())
                line = await self._resp.readline()
            except TimeoutError as e:
                if isinstance(e, WaitTimeoutError):
                    raise
                raise self._cursor.timed_out() from e
            except OSError as e:
                await self.close()
                raise ProtocolError(f"the watch broke: {e}") from e
            if not line:
                break
            ev = self._cursor.take(line)
            if ev is not None:
                return ev
        await self.close()
        return None

    async def close(self) -> None:
        """Ends the watch (and the watcher in the sandbox)."""
        if self._resp is not None:
            resp, self._resp = self._resp, None
            await resp.close()

    async def __aenter__(self) -> AsyncFileWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _safe_member(m: tarfile.TarInfo, dest: str) -> bool:
    """Whether the member (named relative to dest) stays in dest: no absolute name, no .., no link out, no device."""
    if m.isdev() or m.isfifo():
        return False
    parts = m.name.split("/")
    if m.name.startswith("/") or ".." in parts or not m.name:
        return False
    if m.issym() or m.islnk():
        target = m.linkname
        if target.startswith("/"):
            return False
        base = os.path.dirname(m.name) if m.issym() else ""
        joined = os.path.normpath(os.path.join(dest, base, target))
        if os.path.commonpath([joined, dest]) != dest:
            return False
    # Never through a link already there (the archive's own or dest's).
    real = os.path.realpath(os.path.join(dest, os.path.dirname(m.name)))
    return os.path.commonpath([real, os.path.realpath(dest)]) == os.path.realpath(dest)


def extract_dir(fileobj: Any, path: SandboxPath, dest: str | os.PathLike[str]) -> None:
    """Extracts a tar stream of the directory ``path`` (entries named from its base name) into ``dest``, safely."""
    dest_abs = os.path.realpath(os.fspath(dest))
    os.makedirs(dest_abs, exist_ok=True)
    with tarfile.open(fileobj=fileobj, mode="r|") as tar:
        prefix = ""
        for i, m in enumerate(tar):
            if i == 0:
                if not m.isdir():
                    what = "symbolic link" if m.issym() else "file"
                    raise ConflictError(f"cannot download {os.fsdecode(os.fspath(path))!r} as a directory: it is a {what}",
                                        reason="not_a_directory")
                prefix = m.name.rstrip("/") + "/"
                continue
            if not m.name.startswith(prefix):
                raise ProtocolError(f"an entry of the archive is outside its directory: {m.name!r}")
            m.name = m.name[len(prefix):]
            if m.islnk() and m.linkname.startswith(prefix):
                m.linkname = m.linkname[len(prefix):]
            if not _safe_member(m, dest_abs):
                raise ProtocolError(f"refused an entry of the archive that would leave {dest_abs}: {m.name!r}"
                                    + (f" -> {m.linkname!r}" if m.linkname else ""))
            if hasattr(tarfile, "data_filter"):
                extract: Any = tar.extract  # filter: Python 3.12, and security releases before it
                extract(m, dest_abs, set_attrs=not m.isdir(), filter="data")
            else:  # Python before the extraction filters
                tar.extract(m, dest_abs, set_attrs=not m.isdir())


# The operations (flows, run by either client).


def _files(sandbox_id: str, route: str = "") -> str:
    return sandbox_path(sandbox_id, "files" + route)


def list_dir(sandbox_id: str, path: SandboxPath, *, depth: int, limit: int | None) -> Flow[list[FileEntry]]:
    """``GET …/files/list``."""
    doc = decode_json((yield from fetch(Request("GET", _files(sandbox_id, "/list"),
                                                query=_query(("path", path), ("depth", depth), ("limit", limit))))))
    return EntryList([FileEntry.from_json(e) for e in doc.get("entries") or []], bool(doc.get("truncated")))


def stat(sandbox_id: str, path: SandboxPath) -> Flow[FileEntry]:
    """``GET …/files/stat``."""
    doc = decode_json((yield from fetch(Request("GET", _files(sandbox_id, "/stat"), query=_query(("path", path))))))
    return FileEntry.from_json(doc)


def exists(sandbox_id: str, path: SandboxPath) -> Flow[bool]:
    """Whether ``stat`` finds the path."""
    try:
        yield from stat(sandbox_id, path)
    except PathNotFoundError:
        return False
    return True


def remove(sandbox_id: str, path: SandboxPath, *, recursive: bool) -> Flow[None]:
    """``DELETE …/files``."""
    yield from fetch(Request("DELETE", _files(sandbox_id), query=_query(("path", path), ("recursive", recursive))))


def mkdir(sandbox_id: str, path: SandboxPath, *, parents: bool) -> Flow[None]:
    """``POST …/files/mkdir``."""
    yield from fetch(Request("POST", _files(sandbox_id, "/mkdir"), query=_query(("path", path), ("parents", parents))))


def rename(sandbox_id: str, src: SandboxPath, dst: SandboxPath, *, overwrite: bool) -> Flow[None]:
    """``POST …/files/rename``."""
    yield from fetch(Request("POST", _files(sandbox_id, "/rename"),
                             query=_query(("from", src), ("to", dst), ("overwrite", overwrite))))


def download_request(sandbox_id: str, path: SandboxPath) -> Request:
    """``GET …/files`` as a tar stream."""
    return Request("GET", _files(sandbox_id), query=_query(("path", path)), headers={"Accept": "application/x-tar"},
                   stream=True)


def download_dir(sandbox_id: str, path: SandboxPath, dest: str | os.PathLike[str]) -> Flow[None]:
    """The archive of ``path``, extracted into ``dest`` in a thread (the asyncio client's)."""
    data = yield from fetch(download_request(sandbox_id, path))
    yield Offload(lambda: extract_dir(io.BytesIO(data), path, dest))


def watch_request(sandbox_id: str, path: SandboxPath, *, recursive: bool, max_dirs: int | None,
                  rate: int | None) -> Request:
    """``GET …/files/watch`` (server-sent events)."""
    return Request("GET", _files(sandbox_id, "/watch"), headers={"Accept": "text/event-stream"}, stream=True,
                   query=_query(("path", path), ("recursive", recursive), ("max_dirs", max_dirs), ("rate", rate)))


class EntryList(list):  # type: ignore[type-arg]
    """A listing: a list of :class:`FileEntry` that says whether it was cut (``truncated``)."""

    def __init__(self, entries: list[FileEntry], truncated: bool) -> None:
        super().__init__(entries)
        self.truncated: bool = truncated


class _Reader:
    """A Response as the file object tarfile's stream mode reads."""

    def __init__(self, resp: Response) -> None:
        self._resp = resp

    def read(self, n: int = -1) -> bytes:
        return self._resp.read(n)


_LIST_DOC = """The entries of the directory ``path`` (``GET …/files/list``), sorted by name.

        With ``depth`` > 1 those of its subdirectories too, each directory's
        entries followed by those of the subdirectory it names. At most
        ``limit`` entries (the daemon's default, 10000, without it): the list's
        ``truncated`` says whether there were more. Raises
        :class:`PathNotFoundError` for a missing path, :class:`ConflictError`
        (``not_a_directory``) for a file.
        """


class FilesMixin:
    """The files operations of :class:`airlock.Sandbox` beside read and write."""

    client: Client
    id: str

    def list_dir(self, path: SandboxPath, *, depth: int = 1, limit: int | None = None) -> list[FileEntry]:
        return self.client._run(list_dir(self.id, path, depth=depth, limit=limit))

    list_dir.__doc__ = _LIST_DOC

    def stat(self, path: SandboxPath) -> FileEntry:
        """Describes ``path`` (``GET …/files/stat``; a symbolic link is described, not followed)."""
        return self.client._run(stat(self.id, path))

    def exists(self, path: SandboxPath) -> bool:
        """Whether ``path`` exists (a dangling symbolic link does)."""
        return self.client._run(exists(self.id, path))

    def remove(self, path: SandboxPath, *, recursive: bool = False) -> None:
        """Removes a file, a symbolic link or an empty directory; with ``recursive`` a directory and all it holds.

        A directory that holds entries, without ``recursive``, raises
        :class:`DirectoryNotEmptyError`; a missing path :class:`PathNotFoundError`.
        """
        self.client._run(remove(self.id, path, recursive=recursive))

    def mkdir(self, path: SandboxPath, *, parents: bool = False) -> None:
        """Makes the directory ``path`` (mode 0755, the sandbox user's).

        With ``parents`` the missing ones on the way too, and an existing
        directory is no error; without, an existing path raises
        :class:`PathExistsError`.
        """
        self.client._run(mkdir(self.id, path, parents=parents))

    def rename(self, src: SandboxPath, dst: SandboxPath, *, overwrite: bool = False) -> None:
        """Renames ``src`` as ``dst`` within the sandbox (within one of its filesystems).

        Without ``overwrite`` an existing ``dst`` raises :class:`PathExistsError`.
        """
        self.client._run(rename(self.id, src, dst, overwrite=overwrite))

    def download_dir(self, path: SandboxPath, dest: str | os.PathLike[str]) -> None:
        """Copies what the sandbox's directory ``path`` holds into the local directory ``dest`` (as ``cp -r PATH/. DEST``).

        ``dest`` is made when missing. The archive is streamed and extracted
        safely: an entry that would land outside ``dest`` (an absolute name, a
        ``..``, a symbolic link pointing out, a write through a link) raises
        :class:`ProtocolError` before it is written; devices and FIFOs too.
        Permission bits are kept, owners are not.
        """
        with self.client._t.send(download_request(self.id, path)) as resp:
            extract_dir(_Reader(resp), path, dest)

    def watch(self, path: SandboxPath, *, recursive: bool = False, max_dirs: int | None = None,
              rate: int | None = None, timeout: float | None = None) -> FileWatch:
        """Follows what is created, modified and removed under the directory ``path`` (``GET …/files/watch``).

        Returns once the watch is set; iterate the :class:`FileWatch` for the
        events and close it when done. ``recursive`` watches the directories
        below too; ``max_dirs`` (default 1024) and ``rate`` (events a second,
        default 1000) bound it: past them an ``overflow`` event says so.
        ``timeout`` bounds the wait for each event.
        """
        req = watch_request(self.id, path, recursive=recursive, max_dirs=max_dirs, rate=rate)
        return FileWatch(self.client._t.send(req), timeout=timeout)


class AsyncFilesMixin:
    """The files operations of :class:`airlock.aio.AsyncSandbox` beside read and write (:class:`FilesMixin`'s, awaited)."""

    client: AsyncClient
    id: str

    async def list_dir(self, path: SandboxPath, *, depth: int = 1, limit: int | None = None) -> list[FileEntry]:
        return await self.client._run(list_dir(self.id, path, depth=depth, limit=limit))

    list_dir.__doc__ = _LIST_DOC

    async def stat(self, path: SandboxPath) -> FileEntry:
        """Describes ``path`` (a symbolic link is described, not followed)."""
        return await self.client._run(stat(self.id, path))

    async def exists(self, path: SandboxPath) -> bool:
        """Whether ``path`` exists."""
        return await self.client._run(exists(self.id, path))

    async def remove(self, path: SandboxPath, *, recursive: bool = False) -> None:
        """Removes a file, a link or an empty directory; with ``recursive`` a directory and all it holds."""
        await self.client._run(remove(self.id, path, recursive=recursive))

    async def mkdir(self, path: SandboxPath, *, parents: bool = False) -> None:
        """Makes the directory ``path``; with ``parents`` the missing ones too."""
        await self.client._run(mkdir(self.id, path, parents=parents))

    async def rename(self, src: SandboxPath, dst: SandboxPath, *, overwrite: bool = False) -> None:
        """Renames ``src`` as ``dst`` within the sandbox."""
        await self.client._run(rename(self.id, src, dst, overwrite=overwrite))

    async def download_dir(self, path: SandboxPath, dest: str | os.PathLike[str]) -> None:
        """Copies what the directory ``path`` holds into the local ``dest``, safely (:meth:`FilesMixin.download_dir`).

        The archive is read whole, then extracted in a thread.
        """
        await self.client._run(download_dir(self.id, path, dest))

    async def watch(self, path: SandboxPath, *, recursive: bool = False, max_dirs: int | None = None,
                    rate: int | None = None, timeout: float | None = None) -> AsyncFileWatch:
        """Follows the changes under the directory ``path`` (:meth:`FilesMixin.watch`): returns once the watch is set."""
        req = watch_request(self.id, path, recursive=recursive, max_dirs=max_dirs, rate=rate)
        return await AsyncFileWatch(await self.client._t.send(req), timeout=timeout)._ready()



