"""A sandbox's lifetime: its deadline and its own idle timeout (docs/api.md, Lifetimes), as the API takes them."""

from __future__ import annotations

import datetime
import math
from typing import Any

#: What happens to a sandbox at its deadline, or once idle for its idle timeout.
POLICIES = ("delete", "stop")

#: What may happen once it is idle for its idle timeout: also "pause" (frozen until unpaused).
IDLE_POLICIES = ("delete", "stop", "pause")

#: The longest timeout or idle timeout the daemon takes, in seconds (a year).
MAX_SECONDS = 365 * 24 * 3600

Seconds = float | int | datetime.timedelta


def seconds(name: str, value: Seconds | None) -> float:
    """A timeout as the API's seconds (``None`` is 0); :class:`ValueError` naming ``name`` when out of range."""
    if value is None:
        return 0.0
    if isinstance(value, datetime.timedelta):
        v = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
    else:
        raise TypeError(f"{name}: a number of seconds or a timedelta, not {type(value).__name__}")
    if math.isnan(v) or v < 0 or v > MAX_SECONDS:
        raise ValueError(f"{name}: must be between 0 and {MAX_SECONDS} seconds (a year), not {v:g}")
    return v


def policy(name: str, value: str | None) -> str | None:
    """An on_timeout or on_idle value, checked."""
    if name == "on_idle":
        if value is not None and value not in IDLE_POLICIES:
            raise ValueError(f"{name}: must be 'delete', 'stop' or 'pause', not {value!r}")
        return value
    if value is not None and value not in POLICIES:
        raise ValueError(f"{name}: must be 'delete' or 'stop', not {value!r}")
    return value


def create_fields(lifetime: Seconds | None, on_timeout: str | None,
                  idle_timeout: Seconds | None, on_idle: str | None) -> dict[str, Any]:
    """The fields of a create request that give a sandbox its lifetime."""
    body: dict[str, Any] = {}
    if (t := seconds("lifetime", lifetime)) > 0:
        body["timeout"] = t
    if policy("on_timeout", on_timeout) is not None:
        body["on_timeout"] = on_timeout
    if (i := seconds("idle_timeout", idle_timeout)) > 0:
        body["idle_timeout"] = i
    if policy("on_idle", on_idle) is not None:
        body["on_idle"] = on_idle
    return body
