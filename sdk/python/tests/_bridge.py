"""airlock.aio's client in the shape of the sync one, so that each scenario of the suite runs through both.

A view calls the async client's method of the same name on an event loop of
its own (a thread), awaits it and hands back the result: a sandbox as a view,
a stream as an iterator and ``with`` block. What is tested is the async
client's own code (its transport, streams, ``async with``); only the awaiting
is done here. Being in a thread of its own, the loop serves calls from several
threads at once (a test that follows events in one and runs a command in
another).
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from typing import Any, TypeVar

import _daemon  # noqa: F401 (puts the package under test on the path)

import airlock
import airlock.aio

C = TypeVar("C", bound=type)

#: What the async client hands back unopened: a stream, seen as an iterator and a ``with`` block.
STREAMS = (airlock.aio.AsyncEventStream, airlock.aio.AsyncExecStream, airlock.aio.AsyncExecOutput, airlock.aio.AsyncFileWatch,
           airlock.aio.AsyncPty)


class Flavor:
    """Which client a test drives: the sync one, or airlock.aio's (seen through a view).

    A class decorated with :func:`both_clients` runs as written with
    ``airlock.Client`` and, as its ``…Async`` twin, with
    ``airlock.aio.AsyncClient``.
    """

    flavor = "sync"

    @classmethod
    def Client(cls, *args: Any, **kwargs: Any) -> Any:
        """A client of these arguments, of the test's flavor."""
        if cls.flavor == "sync":
            return airlock.Client(*args, **kwargs)
        return client(*args, **kwargs)


def both_clients(cls: C) -> C:
    """Adds to the test class's module a twin of it that runs its scenarios through the asyncio client."""
    twin = type(cls.__name__ + "Async", (cls,), {"flavor": "async", "__doc__": f"{cls.__doc__} (airlock.aio)",
                                                  "__module__": cls.__module__})
    setattr(sys.modules[cls.__module__], twin.__name__, twin)
    return cls


class Loop:
    """An event loop running in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="airlock-test-loop", daemon=True)
        self._thread.start()

    def run(self, aw: Any) -> Any:
        """Awaits ``aw`` on the loop and returns its result (or raises its error)."""

        async def wait() -> Any:
            return await aw

        return asyncio.run_coroutine_threadsafe(wait(), self.loop).result()

    def close(self) -> None:
        """Stops the loop once the tasks left on it are cancelled."""

        async def cancel_all() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


_loop: Loop | None = None
_lock = threading.Lock()


def loop() -> Loop:
    """The loop of the tests (started on first use)."""
    global _loop
    with _lock:
        if _loop is None:
            _loop = Loop()
        return _loop


def close() -> None:
    """Stops the loop of the tests, if it was started."""
    global _loop
    with _lock:
        if _loop is not None:
            _loop.close()
            _loop = None


def client(*args: Any, **kwargs: Any) -> Any:
    """An :class:`airlock.aio.AsyncClient` of these arguments, seen as an :class:`airlock.Client`."""
    return wrap(airlock.aio.AsyncClient(*args, **kwargs))


def wrap(obj: Any) -> Any:
    """A view of a client, sandbox or stream of airlock.aio; anything else as it is."""
    if isinstance(obj, STREAMS):
        return _StreamView(obj)
    if isinstance(obj, (airlock.aio.AsyncClient, airlock.aio.AsyncSandbox, airlock.aio.AsyncExec)):
        return _View(obj)
    if type(obj) is list:  # a list of handles (fork's copies); a list type of the SDK's own (EntryList) stays itself
        return [wrap(o) for o in obj]
    return obj


class _View:
    """Forwards every attribute; a method's result is awaited (a stream is not: it is a view) and wrapped."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __repr__(self) -> str:
        return f"<view of {self._target!r}>"

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if inspect.isawaitable(attr) and not isinstance(attr, STREAMS):
            return wrap(loop().run(attr))  # a property that reads (AsyncSandbox.state)
        if inspect.ismethod(attr):

            def call(*args: Any, **kwargs: Any) -> Any:
                res = attr(*args, **kwargs)
                if inspect.isawaitable(res) and not isinstance(res, STREAMS):
                    res = loop().run(res)
                return wrap(res)

            return call
        return wrap(attr)

    def __enter__(self) -> _View:
        loop().run(self._target.__aenter__())
        return self

    def __exit__(self, *exc: Any) -> Any:
        return loop().run(self._target.__aexit__(*exc))


class _StreamView(_View):
    """An async stream as an iterator and a ``with`` block."""

    def __iter__(self) -> _StreamView:
        return self

    def __next__(self) -> Any:
        try:
            return loop().run(self._target.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

