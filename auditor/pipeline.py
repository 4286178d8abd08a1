"""The scan pipeline, in order: sources -> extract -> evaluate -> (rules) -> AuditResult.

Work on C/CUDA files is spread over processes; derived macros and Python predicate
definitions are resolved over the whole input, so those stages run once per input.
"""

from __future__ import annotations

import bisect
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from auditor import __version__, arch, binaries, cuda_gates, engine, features, python_gates, rulebook
from auditor.arch import Target
from auditor.model import AuditResult, FileError, Finding, Gate, InputInfo, SourceFile
from auditor.cache import (
    Cache, content_digest, decode_result, decode_structure, encode_result, encode_structure, input_digest, tool_digest,
)
from auditor.preprocessor import Evaluator, MacroTable, Structure
from auditor.sources import Filters, Provider, providers, read_all

PARALLEL_MIN_FILES = 400
"""Below this many C/CUDA files a process pool costs more than it saves."""


@dataclass(frozen=True)
class Options:
    """What a scan needs besides its inputs."""

    targets: tuple[Target, ...] = field(default_factory=lambda: arch.parse_targets(arch.DEFAULT_TARGETS))
    filters: Filters = Filters()
    jobs: int = 0
    """Worker processes; 0 means one per CPU."""
    download_dir: Optional[Path] = None
    """Where ``name==version`` downloads are kept."""
    cache_dir: Optional[Path] = None
    """Where results are cached; None disables the cache."""
    progress: Optional[Callable[[str, int, int], None]] = None
    """Called as (stage, done, total) while scanning; never for the result."""
    rules: Optional[tuple[rulebook.Rule, ...]] = None
    """The rules to apply; None means the built-in ones."""
    select: tuple[str, ...] = ()
    """Only these rule ids (empty: all)."""
    ignore: tuple[str, ...] = ()
    baseline: frozenset[tuple[str, str]] = frozenset()
    """Findings already known (``engine.load_baseline``); they are not reported again."""


def _scan_chunk(files: list[SourceFile]):
    return [cuda_gates.scan_file(f) for f in files]


def scan_cuda(files: Sequence[SourceFile], jobs: int, progress=None, store: Optional[Cache] = None) -> list:
    """Per-file structure of C/CUDA files (cached by content), in parallel when it pays."""
    results: list = [None] * len(files)
    keys = [f"file:{tool_digest()}:{content_digest(f.data)}" for f in files] if store else []
    misses = []
    for i, f in enumerate(files):
        hit = store.get(keys[i]) if store else None
        scan = _decode_scan(hit, f) if hit is not None else None
        if scan is None:
            misses.append(i)
        else:
            results[i] = scan
    todo = [files[i] for i in misses]
    workers = jobs or os.cpu_count() or 1
    if workers <= 1 or len(todo) < PARALLEL_MIN_FILES:
        computed = [cuda_gates.scan_file(f) for f in todo]
    else:
        size = max(16, len(todo) // (workers * 8))
        chunks = [list(todo[i : i + size]) for i in range(0, len(todo), size)]
        computed = []
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for n, part in enumerate(pool.map(_scan_chunk, chunks)):
                computed.extend(part)
                if progress:
                    progress("c/cuda", n + 1, len(chunks))
    for i, r in zip(misses, computed):
        results[i] = r
    if store:
        store.put_many([(keys[i], _encode_scan(r)) for i, r in zip(misses, computed)])
    return results


def _encode_scan(r) -> list:
    if isinstance(r, FileError):
        return ["error", r.reason]
    return ["scan", encode_structure(r.structure), encode_structure(Structure(r.cccl, (), ()))[0]]


def _decode_scan(entry, f: SourceFile):
    """A cached scan for this file, or None when the entry is not one we wrote."""
    try:
        if entry[0] == "error":
            return FileError(f.path, str(entry[1]), f.input)
        structure = decode_structure(entry[1])
        cccl = decode_structure([entry[2], [], []]).branches
        return cuda_gates.FileScan(f.path, structure, cccl, f.path.split("/", 1)[0])
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def audit_files(files: Sequence[SourceFile], input_name: str, options: Options,
                store: Optional[Cache] = None) -> tuple[list[Gate], list[FileError]]:
    """Gates of one input's files; errors for files that could not be scanned.

    With a cache, an input whose every file is unchanged costs a read and a hash per file.
    """
    key = f"input:{input_digest(files, ())}:{input_name}" if store else ""
    if store:
        hit = decode_result(store.get(key))
        if hit is not None:
            return hit
    gates, errors = _audit_files(files, input_name, options, store)
    if store:
        store.put_many([(key, encode_result(gates, errors))])
    return gates, errors


def _audit_files(files: Sequence[SourceFile], input_name: str, options: Options,
                 store: Optional[Cache]) -> tuple[list[Gate], list[FileError]]:
    errors: list[FileError] = []
    cuda_files = [f for f in files if f.language == "cuda"]
    scans = []
    for r in scan_cuda(cuda_files, options.jobs, options.progress, store):
        (scans if isinstance(r, cuda_gates.FileScan) else errors).append(r)
    table = MacroTable.build((s.path, s.structure) for s in scans)
    evaluator = Evaluator(table)
    gates = cuda_gates.gates(scans, table, evaluator, input_name, errors)
    py_gates, py_errors = python_gates.extract([f for f in files if f.language == "python"])
    gates += [replace(g, input=input_name) for g in py_gates]
    errors += [replace(e, input=input_name) for e in py_errors]
    return gates, errors


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


def apply_rules(gates: Sequence[Gate], files: Sequence[SourceFile], options: Options,
                packages: Optional[dict] = None) -> list[Finding]:
    """Findings for one input's gates; its files hold the suppression comments.

    ``packages``: per package, the best loadability of its binaries per target label
    (:func:`package_verdicts`), for the rules that join gates with shipped GPU code.
    """
    rules = rulebook.builtin() if options.rules is None else options.rules
    sources = [f for f in files if f.language not in ("binary", "binary-listing")]
    return engine.apply(rules, gates, options.targets, sources, options.select, options.ignore, options.baseline,
                        packages or {})


def read_binaries(files: Sequence[SourceFile], input_name: str) -> tuple[list[binaries.BinaryListing], list[FileError]]:
    """The GPU code embedded in an input's shared objects, by path; unreadable ones as errors."""
    listings, errors = [], []
    for f in sorted((f for f in files if f.language in ("binary", "binary-listing")), key=lambda f: f.path):
        if f.language == "binary-listing":  # a rule example's stand-in (rulebook.Example.sources)
            listings.append(binaries.BinaryListing(f.path, tuple(
                binaries.EmbeddedCode("ptx" if t.startswith("compute_") else "sass", t, False, "rule example")
                for t in json.loads(f.data))))
            continue
        try:
            listings.append(binaries.read_embedded(f.data, f.path))
        except binaries.BinaryError as exc:
            errors.append(FileError(f.path, f"not a readable shared object: {exc}", input_name))
    return listings, errors


_RANK = {"native": 2, "jit": 1, "none": 0}


def binary_records(listings: Sequence[binaries.BinaryListing], input_name: str,
                   targets: Sequence[Target]) -> tuple[dict, ...]:
    """Listings as plain data: path, package, entries, per-target verdict (``{}`` without GPU code)."""
    return tuple({
        "path": b.path,
        "package": b.path.split("/", 1)[0],
        "input": input_name,
        "entries": tuple({"kind": e.kind, "target": e.target, "compressed": e.compressed, "note": e.note}
                         for e in b.entries),
        "verdicts": {t.label: binaries.loadability(b.entries, t.capability) for t in targets} if b.entries else {},
    } for b in listings)


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


def audit_input_binaries(files: Sequence[SourceFile], input_name: str, options: Options,
                         store: Optional[Cache] = None):
    """:func:`audit_input`, plus the input's binary records (:func:`binary_records`)."""
    gates, errors = audit_files(files, input_name, options, store)
    gates = with_features(gates, files, options.targets)
    listings, bin_errors = read_binaries(files, input_name)
    records = binary_records(listings, input_name, options.targets)
    findings = apply_rules(gates, files, options, package_verdicts(records))
    return gates, findings, errors + bin_errors, records


def audit_input(files: Sequence[SourceFile], input_name: str, options: Options,
                store: Optional[Cache] = None) -> tuple[list[Gate], list[Finding], list[FileError]]:
    """One input, all stages: gates with what they guard, findings, and errors."""
    gates, findings, errors, _ = audit_input_binaries(files, input_name, options, store)
    return gates, findings, errors


def audit(specs: Sequence[str], options: Options = Options()) -> AuditResult:
    """Scan inputs (none: this interpreter's site-packages) into one result."""
    provs: list[Provider] = providers(specs, options.filters, options.download_dir)
    gates: list[Gate] = []
    errors: list[FileError] = []
    findings: list[Finding] = []
    inputs: list[InputInfo] = []
    shipped: list[dict] = []
    store = Cache(options.cache_dir) if options.cache_dir else None
    try:
        for p in provs:
            files, read_errors = read_all(p)
            inputs.append(p.info())
            g, f, e, b = audit_input_binaries(files, p.spec, options, store)
            shipped += b
            gates += g
            findings += f
            errors += read_errors + e
    finally:
        if store:
            store.close()
    return AuditResult(
        tool_version=__version__,
        targets=options.targets,
        inputs=tuple(inputs),
        gates=tuple(sorted(gates, key=lambda g: (g.input, g.file, g.line, g.kind, g.id))),
        findings=tuple(sorted(findings, key=lambda f: (f.input, f.file, f.line, f.rule, f.gate))),
        errors=tuple(sorted(set(errors), key=lambda e: (e.input, e.file, e.reason))),
        extras=(("binaries", tuple(sorted(shipped, key=lambda r: (r["input"], r["path"])))),) if shipped else (),
    )
