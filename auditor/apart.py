"""Work run in a forked process that ends when it is done, so that its memory goes with it.

A long evaluation leaves Python's allocator holding arenas that a few long-lived objects pin
(the predicate learning of flashinfer 0.7.4 left ≈ 340 MB of them holding 17 MB of live
objects): no ``free`` gives them back, but a process that exits does. Only the result, which
must pickle, comes back; the child's progress reports are passed on as they come.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
Report = Callable[..., None]


def apart(work: Callable[[Report], T], progress: Report | None = None) -> T | None:
    """``work(report)`` in a forked child; its result, or None when the child ended without one
    (killed, out of memory) or this platform does not fork (the child must inherit the
    caller's state): the caller then does the work itself. An exception in ``work`` is raised
    here again (as a RuntimeError with its text when it does not pickle)."""
    return begun(work, progress)()


def begun(work: Callable[[Report], T], progress: Report | None = None) -> Callable[[], T | None]:
    """:func:`apart`, started: the child runs while the caller goes on (two such children use
    two cores), and calling what this returns waits for its result. The child's progress
    reports are passed on while the caller waits."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return lambda: None
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            value: Any = ("done", work(lambda *args: send.send(("progress", args))))
        except BaseException as exc:  # handed to the parent, which raises it
            value = ("error", exc)
        try:
            send.send(value)
        except Exception as exc:  # an unpicklable result or exception
            send.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))

    process = ctx.Process(target=child, daemon=True)
    process.start()
    send.close()

    def result() -> T | None:
        try:
            while True:
                try:
                    kind, value = receive.recv()
                except EOFError:
                    return None
                if kind == "progress":
                    if progress:
                        progress(*value)
                elif kind == "done":
                    return value
                else:
                    raise value
        finally:
            receive.close()
            if process.is_alive():
                process.terminate()
            process.join()

    return result
