"""Where one input's per-file work runs: this process, or a pool of worker processes.

Workers read each file themselves (a path travels, not its bytes, except for in-memory files
sent in bounded batches) and send back only compact results: a digest, whether it mentions
the suppression marker, and a C/CUDA file's directive structure. The Python pass, which
resolves predicates over the whole input, runs in a worker of its own and reports its
progress back through a queue.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from auditor.cuda import gates as cuda_gates
from auditor.cuda import host, structure
from auditor.cuda.gates import FileScan
from auditor.cuda.structure import Structure
from auditor.model import FileError, Gate
from auditor.pipeline.cache import Cache, Codec, KeptBatches, content_digest, stream_digest, tool_digest
from auditor.python import extract as python_gates
from auditor.sources import LazyFile, Origin, ReadError, open_origin, read_origin

PARALLEL_MIN_FILES = 400
"""Below this many files a process pool costs more than it saves."""
CHUNK_BYTES = 8 * 2**20
"""In-memory files (sdists, git revisions) go to a worker in batches of about this many bytes."""
HOST_PASS = os.environ.get("ARCHAUDIT_BENCH_NO_HOST_PASS") != "1"
"""Whether C/CUDA files get the host C++ pass (:mod:`auditor.cuda.host`). Off only for the
benchmark, which times a scan without it (``bench/run.py --host-pass``): never with a cache."""
STREAM_CHUNK = 1 << 20
"""Shared objects are read this many bytes at a time."""
MARKER = b"archaudit:"
"""Files that mention it may hold suppression comments (the rule engine reads only those)."""

T = TypeVar("T")
Progress = Callable[[str, int, int], None]
Scanned = FileScan | FileError | None
"""A C/CUDA file's structure; None for a file with no directive or CCCL call; or why it has none."""


@dataclass(frozen=True, slots=True)
class FileRead:
    """What the first read of a file told: why it could not be read, or its digest and marker."""

    error: str | None = None
    digest: str = ""
    """Content digest (only when asked for)."""
    marker: bool = False
    """Whether it mentions :data:`MARKER`."""


Read = tuple[FileRead, Scanned]
"""A file's read, with its structure when it is a C/CUDA file and a scan was asked for."""


def _task(f: Any, digest: bool, scan: bool) -> tuple:
    """A file as a worker task: where to read it (or its bytes), and what to do with them."""
    return (f.origin if isinstance(f, LazyFile) else f.data, f.path, f.input, f.language, digest, scan)


def _work(tasks: Sequence[tuple]) -> list[Read]:
    """Worker side: read each file once; digest, marker and (C/CUDA) structure from its bytes.

    The bytes stay in the worker: only the compact result travels back.
    """
    out: list[Read] = []
    for payload, path, input_name, language, digest, scan in tasks:
        if language == "binary" and isinstance(payload, Origin):
            out.append((_streamed(payload, digest), None))
            continue
        try:
            data = read_origin(payload) if isinstance(payload, Origin) else payload
        except ReadError as exc:
            out.append((FileRead(error=str(exc)), None))
            continue
        result = cuda_gates.scan_bytes(path, data, input_name) if scan and language == "cuda" else None
        if scan and language == "cuda" and not isinstance(result, FileError) and HOST_PASS and host.wanted(data):
            result = _with_host(result, path, host.scan_bytes(data))
        out.append((FileRead(None, content_digest(data) if digest else "", MARKER in data), result))
    return out


def _streamed(origin: Origin, digest: bool) -> FileRead:
    """A shared object's first read, a chunk at a time (they run to hundreds of MB): read
    through, so that a corrupt member is found here as any other file's is, and digested when
    asked; suppression comments are not looked for in binaries."""
    try:
        with open_origin(origin) as fh:
            value = stream_digest(iter(lambda: fh.read(STREAM_CHUNK), b""))
        return FileRead(None, value if digest else "", False)
    except ReadError as exc:
        return FileRead(error=str(exc))
    except Exception as exc:  # zipfile raises many kinds on a corrupt member (as read_origin says it)
        lines = str(exc).strip().splitlines()
        return FileRead(error=f"corrupt archive member ({lines[0] if lines else type(exc).__name__})")


def _with_host(scanned: FileScan | None, path: str, found: host.HostScan) -> FileScan | None:
    """A file's scan with its host checks (a file with no directive gets a scan of its own)."""
    if not (found.checks or found.helpers):
        return scanned
    if scanned is None:
        return FileScan(path, Structure((), ()), (), path.split("/", 1)[0], found)
    return replace(scanned, host=found)


def located(scanned: Scanned, f: Any) -> Scanned:
    """A scan result (perhaps from the cache, which keeps it by content alone) placed at ``f``."""
    if isinstance(scanned, FileScan):
        return replace(scanned, path=f.path, package=f.path.split("/", 1)[0])
    if isinstance(scanned, FileError):
        return replace(scanned, file=f.path, input=f.input)
    return scanned


def _encode_read(read: Read) -> list | None:
    info, scanned = read
    if info.error is not None:
        return None  # the file, not its content: not to be kept by digest
    if scanned is None:
        return ["none"]
    if isinstance(scanned, FileError):
        return ["error", scanned.reason]
    return [
        "scan",
        structure.encode(scanned.structure),
        structure.encode(Structure(scanned.cccl, (), ()))[0],
        host.encode(scanned.host),
        list(scanned.compiles_for),
    ]


def _decode_read(entry: Any) -> Read:
    if entry == ["none"]:
        return FileRead(), None
    if entry[0] == "error" and len(entry) == 2:
        return FileRead(), FileError("", str(entry[1]))
    if entry[0] != "scan" or len(entry) != 5:
        raise ValueError("not a file scan")
    cccl = structure.decode([entry[2], [], [], []]).branches
    return FileRead(), FileScan(
        "", structure.decode(entry[1]), cccl, "", host.decode(entry[3]), tuple(map(str, entry[4]))
    )


SCANNED: Codec[Read] = Codec(_encode_read, _decode_read)
"""A C/CUDA file's scan, kept by its content digest (:func:`located` puts it back in place)."""


def _python_task(
    files: Sequence, jobs: int = 1, toolkits: tuple[str, ...] = (), kept: tuple[Path, int] | None = None
) -> tuple[list[Gate], list[FileError]]:
    """The Python pass in a pool worker, its modules read in ``jobs`` processes of its own. A
    file that cannot be read reads as empty (:class:`LazyFile`): the read pass reports it.
    Its progress goes back through the pool's channel, when the parent opened one. ``kept``:
    the result cache (directory, cap) that keeps its evaluated batches, opened here."""
    global _CHANNEL
    channel = _CHANNEL
    store = Cache(*kept) if kept is not None else None
    memory = KeptBatches(store) if store is not None else None

    def report(step: str, done: int, total: int) -> None:
        # at most ~100 messages a step: all of them fit in the pipe, so the flush below never
        # waits for a parent that is not reading (one that failed and is shutting the pool down)
        if done == total or done % max(1, total // 100) == 0:
            channel.put((step, done, total))

    try:
        if channel is None:
            return python_gates.extract(files, jobs, toolkits=toolkits, kept=memory, salt=tool_digest())
        return python_gates.extract(files, jobs, report, toolkits, kept=memory, salt=tool_digest())
    finally:
        if store is not None:
            store.close()
        if channel is not None:  # flush what is queued before the result goes back (this worker reports no more)
            _CHANNEL = None
            channel.close()
            channel.join_thread()


_CHANNEL: Any = None
"""In pool workers: the queue the Python pass reports its progress to (None: nobody watches)."""


def _open_channel(channel: Any) -> None:
    global _CHANNEL
    _CHANNEL = channel


def finished(value: T) -> Future[T]:
    """A future that is already done (a result at hand, or computed in this process)."""
    done: Future[T] = Future()
    done.set_result(value)
    return done


class Workers:
    """Where one input's work runs: this process, or a pool of ``jobs`` worker processes.

    Tasks hold paths for files on disk or in a zip (the worker reads them itself) and bytes
    only for in-memory files, sent in bounded batches; results come back in order.
    """

    def __init__(self, jobs: int, files: int, progress: Progress | None = None):
        self.workers = jobs or os.cpu_count() or 1
        self.pool: ProcessPoolExecutor | None = None
        self.channel: Any = None
        if self.workers > 1 and files >= PARALLEL_MIN_FILES:
            context = multiprocessing.get_context()
            self.channel = context.Queue() if progress else None
            self.pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=context, initializer=_open_channel, initargs=(self.channel,)
            )
        self.progress = progress

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.channel is not None:
            self.channel.close()

    def python(self, files: Sequence, toolkits: tuple[str, ...] = (), store: Cache | None = None) -> Future:
        """The Python pass under the chosen CUDA ``toolkits``: in a worker when there is a pool
        (see :meth:`wait`), else now. With a ``store``, the batches of modules it evaluated
        last time are kept there, and those whose modules and reads are unchanged are not
        evaluated again."""
        where = store.path.parent if store is not None and store.db is not None and store.path else None
        if self.pool is not None:
            kept = (where, store.max_bytes) if where is not None and store is not None else None
            return self.pool.submit(_python_task, files, self.workers, toolkits, kept)
        memory = KeptBatches(store) if where is not None and store is not None else None
        found = python_gates.extract(files, self.workers, self._python_progress, toolkits, memory, tool_digest())
        return finished(found)

    def wait(self, future: Future) -> tuple[list[Gate], list[FileError]]:
        """The Python pass's result, passing on its progress while it runs (and what it
        reported last, which the worker flushes before it returns)."""
        while self.channel is not None:
            try:
                return future.result(timeout=0.2)
            except FutureTimeout:
                pass
            finally:
                while True:
                    try:
                        self._python_progress(*self.channel.get_nowait())
                    except queue.Empty:
                        break
        return future.result()

    def _python_progress(self, step: str, done: int, total: int) -> None:
        if self.progress:
            self.progress(f"python ({step})", done, total)

    def read(self, files: Sequence, digest: bool, scan: bool, stage: str = "read") -> list[Read]:
        """Each file read once (:func:`_work`), results in their order."""
        if self.pool is None:
            return _work([_task(f, digest, scan) for f in files])
        chunks = self._chunks(files)
        # Lazy files cost a path per task: queue them all. In-memory ones wait for a free slot.
        window = len(chunks) if all(isinstance(f, LazyFile) for f in files) else 2 * self.workers
        out: list[Read] = []
        pending: deque[Future] = deque()
        done = 0
        for lo, hi in chunks:
            pending.append(self.pool.submit(_work, [_task(f, digest, scan) for f in files[lo:hi]]))
            while len(pending) > window or (pending and len(pending) + done == len(chunks)):
                out += pending.popleft().result()
                done += 1
                if self.progress:
                    self.progress(stage, done, len(chunks))
        return out

    def _chunks(self, files: Sequence) -> list[tuple[int, int]]:
        count = max(16, len(files) // (self.workers * 8))
        out, lo, size = [], 0, 0
        for i, f in enumerate(files):
            size += 0 if isinstance(f, LazyFile) else len(f.data)
            if i + 1 - lo >= count or size >= CHUNK_BYTES:
                out.append((lo, i + 1))
                lo, size = i + 1, 0
        if lo < len(files):
            out.append((lo, len(files)))
        return out
