"""Snapshots and forks (docs/snapshots.md), for both clients.

A snapshot is a sandbox's filesystems (its primary's and each service's)
saved as images of its Engine, with the manifest it was made from (every
substituted value masked). :meth:`Sandbox.snapshot` takes one,
:meth:`Client.snapshots` lists them, :meth:`Client.delete_snapshot` removes
one, ``Client.create(from_snapshot=…)`` starts a sandbox of one and
:meth:`Sandbox.fork` makes copies of a running sandbox. The flows are here, as
:mod:`airlock._ops`'s are; each client has one line per method.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

from ._ops import Flow, fetch_json, post_json, wait_ready
from ._wire import Request, sandbox_path
from .models import SandboxInfo


@dataclass(frozen=True)
class SnapshotImage:
    """The image of one container of a snapshot: ``service`` is ``""`` for the primary."""

    image: str
    id: str
    service: str = ""
    size: int = 0

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SnapshotImage:
        """Reads the daemon's JSON."""
        return cls(image=str(d.get("image") or ""), id=str(d.get("id") or ""), service=str(d.get("service") or ""),
                   size=int(d.get("size") or 0))


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot the daemon holds: its ``name``, the ``sandbox`` it was taken of,
    when (``created_at``, RFC 3339), its images (``primary``, ``services``) and
    the manifest it recorded (``manifest``, values masked)."""

    name: str
    sandbox: str
    created_at: str
    primary: SnapshotImage
    services: list[SnapshotImage] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SnapshotInfo:
        """Reads the daemon's JSON."""
        return cls(name=str(d.get("name") or ""), sandbox=str(d.get("sandbox") or ""),
                   created_at=str(d.get("created_at") or ""), primary=SnapshotImage.from_json(d.get("primary") or {}),
                   services=[SnapshotImage.from_json(s) for s in d.get("services") or []],
                   manifest=d.get("manifest") if isinstance(d.get("manifest"), dict) else None, raw=d)


def take_snapshot(sandbox_id: str, name: str | None) -> Flow[SnapshotInfo]:
    """``POST /v1/sandboxes/{id}/snapshots``."""
    body = {"name": name} if name else {}
    return SnapshotInfo.from_json((yield from post_json(sandbox_path(sandbox_id, "snapshots"), body)))


def snapshots() -> Flow[list[SnapshotInfo]]:
    """``GET /v1/snapshots``."""
    return (yield from fetch_json(Request("GET", "/v1/snapshots"),
                                  lambda doc: [SnapshotInfo.from_json(d) for d in doc or []]))


def delete_snapshot(name: str) -> Flow[SnapshotInfo]:
    """``DELETE /v1/snapshots/{name}``."""
    return (yield from fetch_json(Request("DELETE", "/v1/snapshots/" + urllib.parse.quote(name, safe="")),
                                  SnapshotInfo.from_json))


def fork(sandbox_id: str, n: int | None, *, ids: Sequence[str] | None = None, wait: bool,
         timeout: float | None) -> Flow[list[SandboxInfo]]:
    """``POST /v1/sandboxes/{id}/fork``; with ``wait`` the copies' records once each is ready.

    ``ids`` names the copies (``n``, when given, must be as many); the fork is
    whole or nothing: a copy that cannot be made (its ID in use) fails it,
    and the daemon removes the copies made before it and the fork's snapshot.
    """
    body: dict[str, Any] = {}
    if ids is not None:
        if isinstance(ids, str) or not all(isinstance(i, str) for i in ids) or not ids:
            raise ValueError(f"fork: ids must be a list of sandbox IDs, one a copy, not {ids!r}")
        body["ids"] = list(ids)
        if n is None:
            n = len(body["ids"])
        elif n != len(body["ids"]):
            raise ValueError(f"fork: {len(body['ids'])} ids given for n={n}: give one a copy")
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"fork: n must be a whole number of copies, at least 1, not {n!r}")
    body["count"] = n
    doc = yield from post_json(sandbox_path(sandbox_id, "fork"), body)
    infos = [SandboxInfo.from_json(d) for d in (doc or {}).get("sandboxes") or []]
    if not wait:
        return infos
    ready = []
    for i in infos:
        ready.append((yield from wait_ready(i.id, timeout)))
    return ready
