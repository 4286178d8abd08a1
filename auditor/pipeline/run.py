"""The scan pipeline, in order: sources -> extract -> evaluate -> (rules) -> AuditResult.

Files are streamed: sources list them (path and where the bytes are), worker processes read
each one themselves and send back only compact results (digest, suppression marker, C/CUDA
directive structure), and later stages re-read only the files they need (guarded regions,
suppression comments, shared objects). Derived macros and Python predicate definitions are
resolved over the whole input, so those stages run once per input: the Python pass in a
worker of its own while this process evaluates the C/CUDA gates.
"""

from __future__ import annotations

import bisect
import json
import multiprocessing
import os
import queue
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from pathlib import Path

from auditor import __version__, arch
from auditor.arch import Target
from auditor.cuda import gates as cuda_gates
from auditor.cuda.macros import Evaluator, MacroTable
from auditor.cuda.structure import Structure
from auditor.facts import binaries, features
from auditor.model import AuditResult, FileError, Finding, Gate, InputInfo, SourceFile
from auditor.pipeline.cache import (
    Cache,
    content_digest,
    decode_final,
    decode_result,
    decode_structure,
    encode_final,
    encode_result,
    encode_structure,
    input_digest,
    json_digest,
    tool_digest,
)
from auditor.python import extract as python_gates
from auditor.rules import engine, rulebook
from auditor.sources import (
    Filters,
    InputError,
    LazyFile,
    Origin,
    Provider,
    ReadError,
    close_archives,
    provider_for,
    providers,
    read_all,
    read_origin,
)

PARALLEL_MIN_FILES = 400
"""Below this many files a process pool costs more than it saves."""


@dataclass(frozen=True)
class Options:
    """What a scan needs besides its inputs."""

    targets: tuple[Target, ...] = field(default_factory=lambda: arch.parse_targets(arch.DEFAULT_TARGETS))
    filters: Filters = Filters()
    jobs: int = 0
    """Worker processes; 0 means one per CPU."""
    download_dir: Path | None = None
    """Where ``name==version`` downloads are kept."""
    cache_dir: Path | None = None
    """Where results are cached; None disables the cache."""
    progress: Callable[[str, int, int], None] | None = None
    """Called as (stage, done, total) while scanning; never for the result."""
    rules: tuple[rulebook.Rule, ...] | None = None
    """The rules to apply; None means the built-in ones."""
    select: tuple[str, ...] = ()
    """Only these rule ids (empty: all)."""
    ignore: tuple[str, ...] = ()
    baseline: frozenset[tuple[str, str]] = frozenset()
    """Findings already known (``engine.load_baseline``); they are not reported again."""


CHUNK_BYTES = 8 * 2**20
"""In-memory files (sdists, git revisions) go to a worker in batches of about this many bytes."""
MARKER = b"archaudit:"
"""Files that mention it may hold suppression comments (the rule engine reads only those)."""


@dataclass(frozen=True, slots=True)
class FileRead:
    """What the first read of a file told: why it could not be read, or its digest and marker."""

    error: str | None = None
    digest: str = ""
    """Content digest (only when a cache asked for it)."""
    marker: bool = False
    """Whether it mentions :data:`MARKER`."""


def _task(f, digest: bool, scan: bool) -> tuple:
    """A file as a worker task: where to read it (or its bytes), and what to do with them."""
    return (f.origin if isinstance(f, LazyFile) else f.data, f.path, f.input, f.language, digest, scan)


def _work(tasks: Sequence[tuple]) -> list[tuple[FileRead, object]]:
    """Worker side: read each file once; digest, marker and (C/CUDA) structure from its bytes.

    The bytes stay in the worker: only the compact result travels back.
    """
    out: list[tuple[FileRead, object]] = []
    for payload, path, input_name, language, digest, scan in tasks:
        try:
            data = read_origin(payload) if isinstance(payload, Origin) else payload
        except ReadError as exc:
            out.append((FileRead(error=str(exc)), None))
            continue
        result = cuda_gates.scan_bytes(path, data, input_name) if scan and language == "cuda" else None
        out.append((FileRead(None, content_digest(data) if digest else "", MARKER in data), result))
    return out


def _python_task(files: Sequence, jobs: int = 1) -> tuple[list[Gate], list[FileError]]:
    """The Python pass in a pool worker, its modules read in ``jobs`` processes of its own. A
    file that cannot be read reads as empty (:class:`LazyFile`): the read pass reports it.
    Its progress goes back through the pool's channel, when the parent opened one."""
    global _CHANNEL
    channel = _CHANNEL
    if channel is None:
        return python_gates.extract(files, jobs)

    def report(step: str, done: int, total: int) -> None:
        # at most ~100 messages a step: all of them fit in the pipe, so the flush below never
        # waits for a parent that is not reading (one that failed and is shutting the pool down)
        if done == total or done % max(1, total // 100) == 0:
            channel.put((step, done, total))

    try:
        return python_gates.extract(files, jobs, report)
    finally:  # flush what is queued before the result goes back (this worker reports no more)
        _CHANNEL = None
        channel.close()
        channel.join_thread()


_CHANNEL = None
"""In pool workers: the queue the Python pass reports its progress to (None: nobody watches)."""


def _open_channel(channel) -> None:
    global _CHANNEL
    _CHANNEL = channel


class _Runner:
    """Where one input's work runs: this process, or a pool of ``jobs`` worker processes.

    Tasks hold paths for files on disk or in a zip (the worker reads them itself) and bytes
    only for in-memory files, sent in bounded batches; results come back in order.
    """

    def __init__(self, jobs: int, files: int, progress=None):
        self.workers = jobs or os.cpu_count() or 1
        use_pool = self.workers > 1 and files >= PARALLEL_MIN_FILES
        self.pool = self.channel = None
        if use_pool:
            context = multiprocessing.get_context()
            self.channel = context.Queue() if progress else None
            self.pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=context, initializer=_open_channel, initargs=(self.channel,)
            )
        self.progress = progress

    def __enter__(self) -> _Runner:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.channel is not None:
            self.channel.close()

    def python(self, files: Sequence) -> Future:
        """The Python pass: in a worker when there is a pool (see :meth:`wait`), else now."""
        if self.pool is not None:
            return self.pool.submit(_python_task, files, self.workers)
        done: Future = Future()
        done.set_result(python_gates.extract(files, self.workers, self._python_progress))
        return done

    def wait(self, future: Future):
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

    def map(self, files: Sequence, digest: bool, scan: bool, stage: str = "read") -> list[tuple[FileRead, object]]:
        """:func:`_work` over ``files``, results in their order."""
        if self.pool is None:
            return _work([_task(f, digest, scan) for f in files])
        chunks = self._chunks(files)
        # Lazy files cost a path per task: queue them all. In-memory ones wait for a free slot.
        window = len(chunks) if all(isinstance(f, LazyFile) for f in files) else 2 * self.workers
        out: list[tuple[FileRead, object]] = []
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


def scan_cuda(files: Sequence, runner: _Runner, store: Cache | None = None, digests: Sequence[str] = ()) -> list:
    """Per-file structure of C/CUDA files (cached by content digest), in parallel when it pays:
    a FileScan, None for a file with no directive or CCCL call, or a FileError."""
    results: list = [None] * len(files)
    keys = [f"file:{tool_digest()}:{d}" for d in digests] if store else []
    misses = list(range(len(files)))
    if store:
        hits = store.get_many(keys)
        misses = []
        for i, f in enumerate(files):
            scan = _decode_scan(hits[keys[i]], f) if keys[i] in hits else _MISS
            if scan is _MISS:
                misses.append(i)
            else:
                results[i] = scan
    computed = runner.map([files[i] for i in misses], digest=False, scan=True, stage="c/cuda")
    for i, (read, r) in zip(misses, computed):
        results[i] = FileError(files[i].path, read.error, files[i].input) if read.error else r
    if store:
        store.put_many(
            [(keys[i], _encode_scan(results[i])) for i, (read, _) in zip(misses, computed) if read.error is None]
        )
    return results


_MISS = object()


def _encode_scan(r) -> list:
    if r is None:
        return ["none"]
    if isinstance(r, FileError):
        return ["error", r.reason]
    return ["scan", encode_structure(r.structure), encode_structure(Structure(r.cccl, (), ()))[0]]


def _decode_scan(entry, f):
    """A cached scan of this file (None: nothing in it), or _MISS for an entry we did not write."""
    try:
        if entry == ["none"]:
            return None
        if entry[0] == "error" and len(entry) == 2:
            return FileError(f.path, str(entry[1]), f.input)
        if entry[0] != "scan" or len(entry) != 3:
            return _MISS
        structure = decode_structure(entry[1])
        cccl = decode_structure([entry[2], [], []]).branches
        return cuda_gates.FileScan(f.path, structure, cccl, f.path.split("/", 1)[0])
    except (IndexError, KeyError, TypeError, ValueError):
        return _MISS


def _python_files(files: Sequence, reads: Sequence[tuple[FileRead, object]] | None) -> list:
    if reads is None:
        return [f for f in files if f.language == "python"]
    return [f for f, (r, _) in zip(files, reads) if f.language == "python" and r.error is None]


def _cuda_gates(
    files: Sequence,
    reads: Sequence[tuple[FileRead, object]],
    scanned: bool,
    input_name: str,
    store: Cache | None,
    runner: _Runner,
) -> tuple[list[Gate], list[FileError]]:
    """C/CUDA gates and the input's read and scan errors. ``reads``: the first read of every
    file (:meth:`_Runner.map`), with the structure of C/CUDA files when ``scanned`` then."""
    errors = [FileError(f.path, r.error, input_name) for f, (r, _) in zip(files, reads) if r.error]
    cuda = [(f, r, s) for f, (r, s) in zip(files, reads) if f.language == "cuda" and r.error is None]
    if scanned:
        results = [s for _, _, s in cuda]
    else:
        results = scan_cuda([f for f, _, _ in cuda], runner, store, [r.digest for _, r, _ in cuda])
    del cuda
    scans = []
    for r in results:
        if isinstance(r, FileError):
            errors.append(replace(r, input=input_name))
        elif r is not None:
            scans.append(r)
    del results
    table = MacroTable.build((s.path, s.structure) for s in scans)
    gates = cuda_gates.gates(scans, table, Evaluator(table), input_name, errors)
    return gates, errors


def _python_result(found: tuple[list[Gate], list[FileError]], input_name: str) -> tuple[list[Gate], list[FileError]]:
    py_gates, py_errors = found
    return [replace(g, input=input_name) for g in py_gates], [replace(e, input=input_name) for e in py_errors]


def with_features(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """Attach the fact-table tokens used inside gates that exclude a requested target.

    Only excluding gates: that is where "what does the code need" decides hardware vs
    conservative, and it bounds the work (each guarded line is scanned once per file).
    """
    by_path = {f.path: f for f in files}
    wanted: dict[str, list[int]] = {}
    for i, g in enumerate(gates):
        first, last = g.body_lines
        if g.file in by_path and last >= first and not all(arch.admits_target(g.domain, g.admits, t) for t in targets):
            wanted.setdefault(g.file, []).append(i)
    out = list(gates)
    for path, indices in wanted.items():
        lines = by_path[path].data.decode("utf-8", "replace").split("\n")
        found: list = []
        for first, last in _merge(gates[i].body_lines for i in indices):
            found += features.scan_region("\n".join(lines[first - 1 : last]), first)
        found_lines = [f[0] for f in found]
        for i in indices:
            first, last = gates[i].body_lines
            lo, hi = bisect.bisect_left(found_lines, first), bisect.bisect_right(found_lines, last)
            out[i] = replace(gates[i], features=features.distinct(found[lo:hi]))
    return out


def _merge(ranges) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return [(a, b) for a, b in merged]


def apply_rules(
    gates: Sequence[Gate], files: Sequence[SourceFile], options: Options, packages: dict | None = None
) -> list[Finding]:
    """Findings for one input's gates; its files hold the suppression comments.

    ``packages``: per package, the best loadability of its binaries per target label
    (:func:`package_verdicts`), for the rules that join gates with shipped GPU code.
    """
    rules = rulebook.builtin() if options.rules is None else options.rules
    sources = [f for f in files if f.language not in ("binary", "binary-listing")]
    return engine.apply(
        rules, gates, options.targets, sources, options.select, options.ignore, options.baseline, packages or {}
    )


def read_binaries(files: Sequence[SourceFile], input_name: str) -> tuple[list[binaries.BinaryListing], list[FileError]]:
    """The GPU code embedded in an input's shared objects, by path; unreadable ones as errors."""
    listings, errors = [], []
    for f in sorted((f for f in files if f.language in ("binary", "binary-listing")), key=lambda f: f.path):
        if f.language == "binary-listing":  # a rule example's stand-in (rulebook.Example.sources)
            listings.append(
                binaries.BinaryListing(
                    f.path,
                    tuple(
                        binaries.EmbeddedCode("ptx" if t.startswith("compute_") else "sass", t, False, "rule example")
                        for t in json.loads(f.data)
                    ),
                )
            )
            continue
        try:
            listings.append(binaries.read_embedded(f.data, f.path))
        except binaries.BinaryError as exc:
            errors.append(FileError(f.path, f"not a readable shared object: {exc}", input_name))
    return listings, errors


_RANK = {"native": 2, "jit": 1, "none": 0}


def binary_records(
    listings: Sequence[binaries.BinaryListing], input_name: str, targets: Sequence[Target]
) -> tuple[dict, ...]:
    """Listings as plain data: path, package, entries, per-target verdict (``{}`` without GPU code)."""
    return tuple(
        {
            "path": b.path,
            "package": b.path.split("/", 1)[0],
            "input": input_name,
            "entries": tuple(
                {"kind": e.kind, "target": e.target, "compressed": e.compressed, "note": e.note} for e in b.entries
            ),
            "verdicts": {t.label: binaries.loadability(b.entries, t.capability) for t in targets} if b.entries else {},
        }
        for b in listings
    )


def package_verdicts(records: Sequence[dict]) -> dict[str, dict[str, str]]:
    """Per package, the best verdict over its binaries with GPU code (native > jit > none)."""
    out: dict[str, dict[str, str]] = {}
    for r in records:
        if not r["verdicts"]:
            continue
        best = out.setdefault(r["package"], {})
        for label, verdict in r["verdicts"].items():
            if _RANK[verdict] >= _RANK[best.get(label, "none")]:
                best[label] = verdict
    return {p: dict(sorted(v.items())) for p, v in sorted(out.items())}


def audit_input_binaries(files: Sequence, input_name: str, options: Options, store: Cache | None = None):
    """:func:`audit_input`, plus the input's binary records (:func:`binary_records`).

    Each file is read once up front (in the workers: digest for the cache, suppression marker,
    and for C/CUDA files without a cache their structure); later stages read again only the
    files they need. With a cache, an unchanged input costs that read and one lookup.
    """
    files = list(files)
    survey = _survey(files, input_name, options) if store is not None else None
    return _evaluate(files, input_name, options, store, survey)


@dataclass(frozen=True)
class _Survey:
    """An input read once for the cache: each file's first read, and the keys of its results."""

    reads: list
    final_key: str
    """The finished result (gates with features, findings, binary records) under these options."""
    input_key: str
    """The extracted gates and errors, whatever the options."""


def _survey(files: list, input_name: str, options: Options) -> _Survey:
    with _Runner(options.jobs, len(files), options.progress) as runner:
        reads = runner.map(files, digest=True, scan=False)
    digest = input_digest((f.path, f.language, r.error or "", r.digest) for f, (r, _) in zip(files, reads))
    return _Survey(reads, f"result:{digest}:{config_digest(options)}:{input_name}", f"input:{digest}:{input_name}")


def _evaluate(files: list, input_name: str, options: Options, store: Cache | None, survey: _Survey | None) -> tuple:
    """One input's result: from the cache when it holds it, else computed (and stored).
    Without a cache (no ``survey``) the Python pass starts first, beside the workers' first
    read of the files."""
    if survey is not None:
        hit = decode_final(store.get(survey.final_key))
        if hit is not None:
            return hit
    with _Runner(options.jobs, len(files), options.progress) as runner:
        py_future: Future | None = None
        if survey is None:
            py_future = runner.python(_python_files(files, None))
            reads = runner.map(files, digest=False, scan=True)
        else:
            reads = survey.reads
        readable = [f for f, (r, _) in zip(files, reads) if r.error is None]
        marked = [f for f, (r, _) in zip(files, reads) if r.marker]
        extracted = decode_result(store.get(survey.input_key)) if survey is not None else None
        listings, bin_errors = read_binaries(readable, input_name)
        records = binary_records(listings, input_name, options.targets)
        packages = package_verdicts(records)
        if extracted is not None:
            raw, errors = extracted
            gates = with_features(raw, readable, options.targets)
            findings = apply_rules(gates, marked, options, packages)
        else:
            if py_future is None:
                py_future = runner.python(_python_files(files, reads))
            raw, errors = _cuda_gates(files, reads, survey is None, input_name, store, runner)
            del reads
            # While the Python pass runs: the C/CUDA gates' features and findings. Rules see one
            # file's gates and suppression comments at a time, so the two halves add up.
            gates = with_features(raw, readable, options.targets)
            findings = apply_rules(gates, [f for f in marked if f.language != "python"], options, packages)
            py_raw, py_errors = _python_result(runner.wait(py_future), input_name)
            py_gates = with_features(py_raw, readable, options.targets)
            findings += apply_rules(py_gates, [f for f in marked if f.language == "python"], options, packages)
            findings.sort(key=lambda f: (f.input, f.file, f.line, f.rule))
            raw, errors, gates = raw + py_raw, errors + py_errors, gates + py_gates
            if survey is not None:
                store.put_many([(survey.input_key, encode_result(raw, errors))])
        del raw
    result = (gates, findings, errors + bin_errors, records)
    if survey is not None:
        store.put_many([(survey.final_key, encode_final(*result))])
    return result


def config_digest(options: Options) -> str:
    """What besides the files decides a result: targets, rules, selection, baseline."""
    rules = rulebook.builtin() if options.rules is None else options.rules
    parts = [
        [repr(t) for t in options.targets],
        [[r.id, r.name, r.severity, list(r.languages), list(r.kinds), r.condition, r.message, r.source] for r in rules],
        sorted(options.select),
        sorted(options.ignore),
        sorted(map(list, options.baseline)),
    ]
    return json_digest(parts)


def audit_input(
    files: Sequence, input_name: str, options: Options, store: Cache | None = None
) -> tuple[list[Gate], list[Finding], list[FileError]]:
    """One input, all stages: gates with what they guard, findings, and errors."""
    gates, findings, errors, _ = audit_input_binaries(files, input_name, options, store)
    return gates, findings, errors


def audit(specs: Sequence[str], options: Options = Options()) -> AuditResult:
    """Scan inputs (none: this interpreter's site-packages) into one result (:class:`Scan`)."""
    with Scan(specs, options) as scan:
        return scan.result()


@dataclass(frozen=True)
class _Listed:
    provider: Provider
    files: list
    read_errors: list[FileError]
    survey: _Survey


class Scan:
    """A scan of inputs (none: this interpreter's site-packages), in two steps.

    Made, it has resolved its inputs and, with a cache, listed, read and hashed their files:
    ``key`` then names the result before it is built ("" without a cache), so that a caller
    who kept what it made of that result last time (a rendered report) need not build it.
    :meth:`result` builds it. Without a cache each input is listed only when its turn comes,
    so that its files are not held while others are scanned.

    An input that cannot be read at all is reported in ``errors`` (with no file) and named in
    the ``failed_inputs`` extra, and the other inputs are still scanned; when no input can be
    read, the first one's InputError is raised.
    """

    def __init__(self, specs: Sequence[str], options: Options = Options()):
        self.options = options
        self.failed: list[tuple[str, InputError]] = []
        self.store = Cache(options.cache_dir) if options.cache_dir else None
        self.key = ""
        try:
            provs: list[Provider] = providers(specs, options.filters, options.download_dir) if not specs else []
            for spec in specs:
                try:
                    provs.append(provider_for(spec, options.filters, options.download_dir))
                except InputError as exc:
                    self.failed.append((spec, exc))
            self.inputs: list = provs
            if self.store is not None:
                self.inputs = [x for x in map(self._survey, provs) if x is not None]
                if self.inputs:
                    self.key = json_digest(
                        [
                            sorted(
                                [x.survey.final_key, [[e.file, e.reason, e.input] for e in x.read_errors]]
                                for x in self.inputs
                            ),
                            sorted([spec, str(exc)] for spec, exc in self.failed),
                        ]
                    )
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Scan:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release the cache and any archives still open."""
        if self.store:
            self.store.close()
            self.store = None
        close_archives()

    @property
    def names(self) -> list[str]:
        """The inputs, as given (a cache keeps one report per format and set of inputs)."""
        return [x.provider.spec if isinstance(x, _Listed) else x.spec for x in self.inputs]

    def _list(self, p: Provider) -> tuple[list, list[FileError]] | None:
        try:
            return read_all(p)
        except InputError as exc:
            self.failed.append((p.spec, exc))
            return None

    def _survey(self, p: Provider) -> _Listed | None:
        listed = self._list(p)
        if listed is None:
            return None
        files, read_errors = listed
        return _Listed(p, files, read_errors, _survey(files, p.spec, self.options))

    def result(self) -> AuditResult:
        """Every input evaluated, or read from the cache, into one result."""
        options = self.options
        gates: list[Gate] = []
        errors: list[FileError] = []
        findings: list[Finding] = []
        inputs: list[InputInfo] = []
        shipped: list[dict] = []
        for item in self.inputs:
            if isinstance(item, _Listed):
                p, files, read_errors, survey = item.provider, item.files, item.read_errors, item.survey
            else:
                listed = self._list(item)
                if listed is None:
                    continue
                (files, read_errors), p, survey = listed, item, None
            inputs.append(p.info())
            g, f, e, b = _evaluate(files, p.spec, options, self.store, survey)
            del files
            shipped += b
            gates += g
            findings += f
            errors += read_errors + e
        if self.failed and not inputs:
            raise self.failed[0][1]
        for spec, exc in self.failed:
            reason = str(exc)
            errors.append(FileError("", reason[len(spec) + 2 :] if reason.startswith(f"{spec}: ") else reason, spec))
        extras: list[tuple[str, object]] = []
        if shipped:
            extras.append(("binaries", tuple(sorted(shipped, key=lambda r: (r["input"], r["path"])))))
        if self.failed:
            extras.append(("failed_inputs", tuple(sorted(spec for spec, _ in self.failed))))
        return AuditResult(
            tool_version=__version__,
            targets=options.targets,
            inputs=tuple(sorted(inputs, key=lambda i: (i.path, i.kind))),
            gates=tuple(sorted(gates, key=lambda g: (g.input, g.file, g.line, g.kind, g.id))),
            findings=tuple(sorted(findings, key=lambda f: (f.input, f.file, f.line, f.rule, f.gate))),
            errors=tuple(sorted(set(errors), key=lambda e: (e.input, e.file, e.reason))),
            extras=tuple(extras),
            key=self.key,
        )
