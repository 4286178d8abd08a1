"""The scan pipeline, in order: sources -> extract -> evaluate -> (rules) -> AuditResult.

Work on C/CUDA files is spread over processes; derived macros and Python predicate
definitions are resolved over the whole input, so those stages run once per input.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from auditor import __version__, arch, cuda_gates, engine, features, rulebook
from auditor.arch import Target
from auditor.model import AuditResult, FileError, Finding, Gate, InputInfo, SourceFile
from auditor.preprocessor import Evaluator, MacroTable
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
    cache_dir: Optional[Path] = None
    """Where ``name==version`` downloads are kept."""
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


def scan_cuda(files: Sequence[SourceFile], jobs: int, progress=None) -> list:
    """Per-file structure of C/CUDA files, in parallel when it pays."""
    workers = jobs or os.cpu_count() or 1
    if workers <= 1 or len(files) < PARALLEL_MIN_FILES:
        return [cuda_gates.scan_file(f) for f in files]
    size = max(16, len(files) // (workers * 8))
    chunks = [list(files[i : i + size]) for i in range(0, len(files), size)]
    out: list = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for i, part in enumerate(pool.map(_scan_chunk, chunks)):
            out.extend(part)
            if progress:
                progress("c/cuda", i + 1, len(chunks))
    return out


def audit_files(files: Sequence[SourceFile], input_name: str, options: Options) -> tuple[list[Gate], list[FileError]]:
    """Gates of one input's files; errors for files that could not be scanned."""
    errors: list[FileError] = []
    cuda_files = [f for f in files if f.language == "cuda"]
    scans = []
    for r in scan_cuda(cuda_files, options.jobs, options.progress):
        (scans if isinstance(r, cuda_gates.FileScan) else errors).append(r)
    table = MacroTable.build((s.path, s.structure) for s in scans)
    evaluator = Evaluator(table)
    gates = cuda_gates.gates(scans, table, evaluator, input_name, errors)
    from auditor import python_gates  # TEMP until the Python extractor lands

    py_gates, py_errors = python_gates.extract([f for f in files if f.language == "python"])
    gates += [replace(g, input=input_name) for g in py_gates]
    errors += [replace(e, input=input_name) for e in py_errors]
    return _with_features(gates, files), errors


def _with_features(gates: list[Gate], files: Sequence[SourceFile]) -> list[Gate]:
    """Attach the fact-table tokens found in each gate's guarded region."""
    by_path = {f.path: f for f in files}
    lines_of: dict[str, list[str]] = {}
    out = []
    for g in gates:
        first, last = g.body_lines
        f = by_path.get(g.file)
        if f is None or last < first:
            out.append(g)
            continue
        lines = lines_of.get(g.file)
        if lines is None:
            lines = lines_of[g.file] = f.data.decode("utf-8", "replace").splitlines()
        out.append(replace(g, features=features.find(lines, first, last)))
    return out


def apply_rules(gates: Sequence[Gate], files: Sequence[SourceFile], options: Options) -> list[Finding]:
    """Findings for one input's gates; its files hold the suppression comments."""
    rules = rulebook.builtin() if options.rules is None else options.rules
    return engine.apply(rules, gates, options.targets, files, options.select, options.ignore, options.baseline)


def audit_input(files: Sequence[SourceFile], input_name: str,
                options: Options) -> tuple[list[Gate], list[Finding], list[FileError]]:
    """One input, all stages: gates with what they guard, findings, and errors."""
    gates, errors = audit_files(files, input_name, options)
    return gates, apply_rules(gates, files, options), errors


def audit(specs: Sequence[str], options: Options = Options()) -> AuditResult:
    """Scan inputs (none: this interpreter's site-packages) into one result."""
    provs: list[Provider] = providers(specs, options.filters, options.cache_dir)
    gates: list[Gate] = []
    errors: list[FileError] = []
    findings: list[Finding] = []
    inputs: list[InputInfo] = []
    for p in provs:
        files, read_errors = read_all(p)
        inputs.append(p.info())
        g, f, e = audit_input(files, p.spec, options)
        gates += g
        findings += f
        errors += read_errors + e
    return AuditResult(
        tool_version=__version__,
        targets=options.targets,
        inputs=tuple(inputs),
        gates=tuple(sorted(gates, key=lambda g: (g.input, g.file, g.line, g.kind, g.id))),
        findings=tuple(sorted(findings, key=lambda f: (f.input, f.file, f.line, f.rule, f.gate))),
        errors=tuple(sorted(set(errors), key=lambda e: (e.input, e.file, e.reason))),
    )
