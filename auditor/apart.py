"""Work run in a forked process that ends when it is done, so that its memory goes with it.

A long evaluation leaves Python's allocator holding arenas that a few long-lived objects pin
(the predicate learning of flashinfer 0.7.4 left ≈ 340 MB of them holding 17 MB of live
objects): no ``free`` gives them back, but a process that exits does. Only the result, which
must pickle, comes back; the child's progress reports are passed on as they come.

The result is pickled straight into the pipe and read from it, never held whole as bytes on
either side (BIG's judged C/CUDA gates pickled to 54 MB, held by the child at its peak).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
Report = Callable[..., None]

PIPE_BUFFER = 1 << 16
_UNPICKLABLE = 70
"""The child's exit status when its result failed to pickle part way into the pipe."""


def apart(work: Callable[[Report], T], progress: Report | None = None) -> T | None:
    """``work(report)`` in a forked child; its result, or None when the child ended without one
    (killed, out of memory) or this platform does not fork (the child must inherit the
    caller's state): the caller then does the work itself. An exception in ``work`` is raised
    here again (as a RuntimeError with its text when it does not pickle); so is a result that
    does not pickle."""
    return begun(work, progress)()


def begun(work: Callable[[Report], T], progress: Report | None = None) -> Callable[[], T | None]:
    """:func:`apart`, started: the child runs while the caller goes on (two such children use
    two cores), and calling what this returns waits for its result. The child's progress
    reports are passed on while the caller waits."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return lambda: None
    ctx = multiprocessing.get_context("fork")
    read_end, write_end = os.pipe()

    def child() -> None:
        os.close(read_end)
        with open(write_end, "wb", buffering=PIPE_BUFFER) as out:

            def say(message: tuple) -> None:
                pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
                out.flush()

            try:
                value: Any = ("done", work(lambda *args: say(("progress", args))))
            except BaseException as exc:  # handed to the parent, which raises it
                value = ("error", _picklable(exc))
            try:
                say(value)
            except Exception:  # part of a pickle is in the pipe already
                os._exit(_UNPICKLABLE)

    process = ctx.Process(target=child, daemon=True)
    process.start()
    os.close(write_end)

    def result() -> T | None:
        with open(read_end, "rb", buffering=PIPE_BUFFER) as stream:
            try:
                while True:
                    try:
                        kind, value = pickle.load(stream)
                    except (EOFError, pickle.UnpicklingError):
                        process.join()
                        if process.exitcode == _UNPICKLABLE:
                            raise RuntimeError("the result of work done apart does not pickle") from None
                        return None
                    if kind == "progress":
                        if progress:
                            progress(*value)
                    elif kind == "done":
                        return value
                    else:
                        raise value
            finally:
                if process.is_alive():
                    process.terminate()
                process.join()

    return result


def _picklable(exc: BaseException) -> BaseException:
    """The exception, or a RuntimeError with its text when it does not pickle."""
    try:
        pickle.dumps(exc)
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc
