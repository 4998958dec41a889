"""A sandbox's files beyond read and write: list, stat, remove, mkdir, rename, download_dir, watch (docs/api.md, Files).

Paths are ``str`` (or ``bytes``, or a path-like): a name that is not UTF-8 in
the sandbox comes back decoded as :func:`os.fsdecode` decodes it (each
invalid byte a surrogate escape), and such a ``str`` given back names the same
bytes (:func:`os.fsencode`), so a name read from a listing always names its file.
"""

from __future__ import annotations

import base64
import json
import os
import tarfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from ._transport import Response
from .errors import ConflictError, ProtocolError, WaitTimeoutError

if TYPE_CHECKING:
    from .client import Client

__all__ = ["FileEntry", "FileEvent", "FileWatch", "FilesMixin"]

#: A path in the sandbox: text, bytes, or a path-like object.
SandboxPath = Union[str, bytes, "os.PathLike[str]"]


def _query(*pairs: tuple[str, Any]) -> str:
    """A query string; a path goes as its bytes (percent-encoded), so any name can be given."""
    items: list[tuple[str, str | bytes]] = []
    for k, v in pairs:
        if v is None or v is False:
            continue
        if v is True:
            v = "true"
        elif isinstance(v, int):
            v = str(v)
        elif not isinstance(v, str) or k in ("path", "from", "to"):
            v = os.fsencode(v)
        items.append((k, v))
    return urllib.parse.urlencode(items)


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
        self.timeout = timeout
        #: How many directories are watched.
        self.watched: int = 0
        ready = self._next_event()
        if ready is None or ready.type != "ready":
            self.close()
            raise ProtocolError(f"the watch did not start with a ready event: {ready!r}")
        self.watched = ready.watched

    def __iter__(self) -> Iterator[FileEvent]:
        return self

    def __next__(self) -> FileEvent:
        ev = self._next_event()
        if ev is None:
            raise StopIteration
        return ev

    def _next_event(self) -> FileEvent | None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            if self._resp is None:
                return None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeoutError(f"no change within {self.timeout} s")
                self._resp.set_timeout(left)
            try:
                line = self._resp.readline()
            except TimeoutError as e:
                raise WaitTimeoutError(f"no change within {self.timeout} s") from e
            except OSError as e:
                self.close()
                raise ProtocolError(f"the watch broke: {e}") from e
            if not line:
                self.close()
                return None
            if not line.startswith(b"data: "):
                continue  # a blank line, a keep-alive comment
            try:
                return FileEvent.from_json(json.loads(line[6:]))
            except ValueError as e:
                self.close()
                raise ProtocolError(f"a watch event that is not JSON: {line[:200]!r}") from e

    def close(self) -> None:
        """Ends the watch (and the watcher in the sandbox)."""
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


class FilesMixin:
    """The files operations of :class:`Sandbox` beside read and write."""

    client: Client
    id: str

    def _files_path(self, route: str, query: str) -> str:
        return "/v1/sandboxes/" + urllib.parse.quote(self.id, safe="") + "/files" + route + "?" + query

    def _files_json(self, method: str, route: str, query: str) -> Any:
        data = self.client._t.request(method, self._files_path(route, query)).read_all()
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise ProtocolError(f"the daemon's answer is not JSON: {data[:200]!r}") from e

    def list_dir(self, path: SandboxPath, *, depth: int = 1, limit: int | None = None) -> list[FileEntry]:
        """The entries of the directory ``path`` (``GET …/files/list``), sorted by name.

        With ``depth`` > 1 those of its subdirectories too, each directory's
        entries followed by those of the subdirectory it names. At most
        ``limit`` entries (the daemon's default, 10000, without it):
        :attr:`truncated` of the list says whether there were more. Raises
        :class:`PathNotFoundError` for a missing path, :class:`ConflictError`
        (``not_a_directory``) for a file.
        """
        doc = self._files_json("GET", "/list", _query(("path", path), ("depth", depth), ("limit", limit)))
        return _EntryList([FileEntry.from_json(e) for e in doc.get("entries") or []], bool(doc.get("truncated")))

    def stat(self, path: SandboxPath) -> FileEntry:
        """Describes ``path`` (``GET …/files/stat``; a symbolic link is described, not followed)."""
        return FileEntry.from_json(self._files_json("GET", "/stat", _query(("path", path))))

    def exists(self, path: SandboxPath) -> bool:
        """Whether ``path`` exists (a dangling symbolic link does)."""
        from .errors import PathNotFoundError
        try:
            self.stat(path)
        except PathNotFoundError:
            return False
        return True

    def remove(self, path: SandboxPath, *, recursive: bool = False) -> None:
        """Removes a file, a symbolic link or an empty directory; with ``recursive`` a directory and all it holds.

        A directory that holds entries, without ``recursive``, raises
        :class:`DirectoryNotEmptyError`; a missing path :class:`PathNotFoundError`.
        """
        self._files_json("DELETE", "", _query(("path", path), ("recursive", recursive)))

    def mkdir(self, path: SandboxPath, *, parents: bool = False) -> None:
        """Makes the directory ``path`` (mode 0755, the sandbox user's).

        With ``parents`` the missing ones on the way too, and an existing
        directory is no error; without, an existing path raises
        :class:`PathExistsError`.
        """
        self._files_json("POST", "/mkdir", _query(("path", path), ("parents", parents)))

    def rename(self, src: SandboxPath, dst: SandboxPath, *, overwrite: bool = False) -> None:
        """Renames ``src`` as ``dst`` within the sandbox (within one of its filesystems).

        Without ``overwrite`` an existing ``dst`` raises :class:`PathExistsError`.
        """
        self._files_json("POST", "/rename", _query(("from", src), ("to", dst), ("overwrite", overwrite)))

    def download_dir(self, path: SandboxPath, dest: str | os.PathLike[str]) -> None:
        """Copies what the sandbox's directory ``path`` holds into the local directory ``dest`` (as ``cp -r PATH/. DEST``).

        ``dest`` is made when missing. The archive is streamed and extracted
        safely: an entry that would land outside ``dest`` (an absolute name, a
        ``..``, a symbolic link pointing out, a write through a link) raises
        :class:`ProtocolError` before it is written; devices and FIFOs too.
        Permission bits are kept, owners are not.
        """
        dest_abs = os.path.realpath(os.fspath(dest))
        os.makedirs(dest_abs, exist_ok=True)
        resp = self.client._t.request("GET", self._files_path("", _query(("path", path))),
                                      headers={"Accept": "application/x-tar"}, stream=True)
        with resp, tarfile.open(fileobj=_Reader(resp), mode="r|") as tar:
            prefix = ""
            for i, m in enumerate(tar):
                if i == 0:
                    if not m.isdir():
                        raise ConflictError(f"cannot download {os.fsdecode(os.fspath(path))!r} as a directory: it is a "
                                            f"{'symbolic link' if m.issym() else 'file'}", reason="not_a_directory")
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
                    tar.extract(m, dest_abs, set_attrs=not m.isdir(), filter="data")
                else:  # Python before the extraction filters
                    tar.extract(m, dest_abs, set_attrs=not m.isdir())

    def watch(self, path: SandboxPath, *, recursive: bool = False, max_dirs: int | None = None,
              rate: int | None = None, timeout: float | None = None) -> FileWatch:
        """Follows what is created, modified and removed under the directory ``path`` (``GET …/files/watch``).

        Returns once the watch is set; iterate the :class:`FileWatch` for the
        events and close it when done. ``recursive`` watches the directories
        below too; ``max_dirs`` (default 1024) and ``rate`` (events a second,
        default 1000) bound it: past them an ``overflow`` event says so.
        ``timeout`` bounds the wait for each event.
        """
        resp = self.client._t.request("GET", self._files_path("/watch", _query(
            ("path", path), ("recursive", recursive), ("max_dirs", max_dirs), ("rate", rate))),
            headers={"Accept": "text/event-stream"}, stream=True)
        return FileWatch(resp, timeout=timeout if timeout is not None else None)


class _EntryList(list):  # type: ignore[type-arg]
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



