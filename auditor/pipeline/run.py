"""The scan, in order: sources -> read -> extract -> features -> rules -> AuditResult.

Files are streamed: sources list them (path and where the bytes are), worker processes read
each one themselves and send back only compact results (:mod:`.workers`), and later stages
re-read only the files they need (guarded regions, suppression comments, shared objects,
excerpts). Derived macros and Python predicate definitions are resolved over the whole
input, so those stages run once per input: the Python pass in a worker of its own while this
process evaluates the C/CUDA gates.

With a cache, every file is read and hashed first; each stage result is then kept by what
decides it (:meth:`Cache.memo`): a C/CUDA file's structure by its content, an input's
extracted gates by its contents, its finished result by its contents and the options.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from auditor import __version__, arch
from auditor.apart import begun
from auditor.cuda import gates as cuda
from auditor.cuda import host
from auditor.cuda.includes import Scopes
from auditor.cuda.macros import MacroTable
from auditor.facts.binaries import binary_records, binary_verdicts, read_binaries, with_extensions
from auditor.facts.features import with_features
from auditor.facts.lowering import with_lowering
from auditor.facts.remarks import with_remarks
from auditor.model import (
    AuditResult,
    Binary,
    Excerpt,
    FileError,
    Finding,
    Gate,
    InputInfo,
    Reach,
    RuleInfo,
    Severity,
    Target,
    excerpt_windows,
    held_once,
)
from auditor.pipeline import builds, calls, kept, reach
from auditor.pipeline.arguments import with_arguments
from auditor.pipeline.cache import (
    DEFAULT_MAX_BYTES,
    EXTRACTED,
    FINAL,
    Cache,
    Codec,
    InputResult,
    input_digest,
    json_digest,
    tool_digest,
)
from auditor.pipeline.platforms import with_platform
from auditor.pipeline.surroundings import with_surroundings
from auditor.pipeline.workers import SCANNED, Read, Workers, finished, located
from auditor.rules import engine, rulebook
from auditor.rules.roots import vendored
from auditor.sources import (
    Filters,
    InputError,
    Provider,
    ReadError,
    close_archives,
    open_file,
    provider_for,
    providers,
    read_all,
    read_file,
)

APART_GATES = 2000
"""An input with this many gates of a language or more has them judged (features, evidence,
rules) in a forked process that ends (:func:`auditor.apart.begun`): on flashinfer and sglang
together that work peaks ≈ 0.7 GB (C) and ≈ 1 GB (Python) above the process, which the
process that goes on to render no longer keeps. With more than one worker, the C and the
Python gates are judged side by side, each in its process."""


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
    cache_max: int = DEFAULT_MAX_BYTES
    """The result cache's cap in bytes (least recently used entries are evicted past it)."""
    progress: Callable[[str, int, int], None] | None = None
    """Called as (stage, done, total) while scanning; never for the result."""
    rules: tuple[rulebook.Rule, ...] | None = None
    """The rules to apply; None means the built-in ones."""
    select: tuple[str, ...] = ()
    """Only these rule ids (empty: all)."""
    ignore: tuple[str, ...] = ()
    baseline: frozenset[tuple[str, str]] = frozenset()
    """Findings already known (``engine.load_baseline``); they are not reported again."""
    excerpts: bool = False
    """Gather the source lines the HTML report shows (``AuditResult.excerpts``)."""
    unreached: bool = False
    """Judge gates in vendored code the package never reaches too (:mod:`.reach`)."""
    toolkits: tuple[str, ...] = ()
    """The CUDA toolkits evaluated (``12.8``, ``13.0``); empty: every known one. A verdict is
    the newest chosen toolkit's (:func:`arch.chosen_toolkits` checks the names)."""

    @property
    def ruleset(self) -> tuple[rulebook.Rule, ...]:
        """The rules to apply."""
        return rulebook.builtin() if self.rules is None else self.rules


def cuda_gates(
    files: Sequence,
    reads: Sequence[Read],
    input_name: str,
    toolkits: tuple[str, ...] = (),
    python_gates: Sequence[Gate] = (),
    targets: Sequence[Target] = (),
    keep: Keep | None = None,
    evaluated: tuple[list[Gate], list[FileError]] | None = None,
) -> tuple[list[Gate], list[FileError]]:
    """An input's C/CUDA gates under the chosen CUDA ``toolkits``, from its files' reads with
    the structure of the C/CUDA ones (:meth:`Workers.read` with ``scan``), and its read and
    scan errors. The Python gates' build flags say which sources no requested target builds
    (:mod:`.builds`). ``keep`` keeps what the C/CUDA files alone decide (the gates before
    reach, with the errors of finding them; the C side of the uncalled functions), so that
    a change to a Python file does not evaluate them again. ``evaluated``: those gates before
    reach (:func:`c_evaluated`), when found already."""
    errors: list[FileError] = []
    scans = _scans(files, reads, input_name, errors)
    found, more = evaluated if evaluated is not None else c_evaluated(files, reads, input_name, toolkits, keep)
    errors += more
    python = _Read({f.path: f for f in files if f.language == "python" and not vendored(f.path)[0]})
    by_path = {f.path: f for f in files}
    manifests = {f.path: _bytes(f) for f in files if f.language == "manifest" and not vendored(f.path)[0]}
    restricted = builds.restrictions(python_gates, python, targets, manifests) if targets else builds.Restrictions()
    reached = reach.headers(
        [s.path for s in scans],
        [s.structure.includes for s in scans],
        python.items(),
        lambda p: _bytes(by_path[p]),
        [f.path for f in files if f.language == "binary"],
        restricted.unbuilt,
        [s.path for s in scans if s.compiles_for and targets and not builds.serves(s.compiles_for, targets)],
        restricted.behind,
    )
    lines: dict[str, list[int]] = {}
    for g in found:
        if g.file not in reached.reach and vendored(g.file)[0]:
            lines.setdefault(g.file, []).append(g.line)
    dead = (
        calls.uncalled(
            reached.sight,
            lines,
            lambda p: python[p] if p in python else _bytes(by_path[p]),
            keep.side(reached.sight, lines) if keep is not None else None,
        )
        if reached.sight and lines
        else set()
    )
    found = [
        replace(
            g,
            reach=Reach.UNCALLED if (g.file, g.line) in dead else reached.reach.get(g.file, g.reach),
            built_by=reached.behind.get(g.file, ()),
        )
        if g.file in reached.reach or g.file in reached.behind or (g.file, g.line) in dead
        else g
        for g in found
    ]
    return builds.with_pins(found, restricted.pinned), errors


def c_evaluated(
    files: Sequence, reads: Sequence[Read], input_name: str, toolkits: tuple[str, ...] = (), keep: Keep | None = None
) -> tuple[list[Gate], list[FileError]]:
    """An input's C/CUDA gates before reach, with the errors of finding them: what the C/CUDA
    files alone decide, so the scan finds them while the Python pass runs."""
    scans = _scans(files, reads, input_name, [])

    def evaluated() -> tuple[list[Gate], list[FileError]]:
        table = MacroTable.build((s.path, s.structure) for s in scans)
        scopes = Scopes(scans, table, toolkits)
        more: list[FileError] = []
        return cuda.gates(scans, scopes, input_name, more) + host.gates(scans, scopes, input_name, more), more

    if keep is not None:  # kept by content, whatever the input's name
        return _placed(keep.store.memo(keep.key, EXTRACTED, evaluated), input_name)
    return evaluated()


def _scans(files: Sequence, reads: Sequence[Read], input_name: str, errors: list[FileError]) -> list[cuda.FileScan]:
    """The C/CUDA files' structures among the reads; the files that could not be read or
    scanned go to ``errors``."""
    scans: list[cuda.FileScan] = []
    for f, (info, scanned) in zip(files, reads):
        if info.error:
            errors.append(FileError(f.path, info.error, input_name))
        elif isinstance(scanned, FileError):
            errors.append(replace(scanned, input=input_name))
        elif scanned is not None:
            scans.append(scanned)
    return scans


SIDE: Codec[calls.CSide] = Codec(calls.encode_side, calls.decode_side)
"""The C files' part of the uncalled functions (:func:`.calls.c_side`)."""


@dataclass(frozen=True)
class Keep:
    """Where :func:`cuda_gates` keeps what the C/CUDA files alone decide: the result cache, the
    key of the input's non-Python files (:func:`_c_key`) and each file's content digest."""

    store: Cache
    key: str
    digests: Mapping[str, str]

    def side(self, sight: reach.Sight, lines: Mapping[str, list[int]]) -> Callable:
        """The memo of the C side of :func:`.calls.uncalled`: kept by the sight (who includes
        whom), the gate lines, and the contents of the C files."""
        # the include graph of a whole environment is millions of edges: hashed as machine
        # integers, not as JSON (which took seconds)
        h = hashlib.blake2b(digest_size=16)
        h.update("\0".join(sight.files).encode("utf-8", "surrogatepass"))
        for targets in sight.edges:
            h.update(b"|")
            h.update(array("q", targets).tobytes())
        h.update(b"&")
        h.update(array("q", sight.programs).tobytes())
        rest = [
            sorted(sight.written),
            sorted(sight.opaque),
            sight.c_files,
            sorted([p, sorted(ls)] for p, ls in lines.items()),
            [self.digests.get(p, "") for p in sight.files[: sight.c_files]],
        ]
        h.update(json.dumps(rest).encode("utf-8", "surrogatepass"))
        return lambda compute: self.store.memo(f"c-side:{tool_digest()}:{h.hexdigest()}", SIDE, compute)


class _Read(Mapping[str, bytes]):
    """Files' bytes by path, read each time they are asked for: held together, the package's
    Python files would cost their size through the C/CUDA stages."""

    def __init__(self, files: dict) -> None:
        self.files = files

    def __getitem__(self, path: str) -> bytes:
        return _bytes(self.files[path])

    def __contains__(self, path: object) -> bool:
        return path in self.files

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


def _bytes(f) -> bytes:
    """A file's bytes, or none when it can no longer be read (its read error is reported elsewhere)."""
    try:
        return read_file(f)
    except ReadError:
        return b""


def apply_rules(
    gates: Sequence[Gate], files: Sequence, options: Options, packages: Mapping[str, Mapping[str, str]] | None = None
) -> list[Finding]:
    """Findings for one input's gates; its files hold the suppression comments.

    ``packages``: per shipped binary, its loadability per target label
    (:func:`~auditor.facts.binaries.binary_verdicts`), for the rules that join a gate with the
    binaries its guarded code reaches.
    """
    sources = [f for f in files if f.language in ("python", "cuda")]
    return engine.apply(
        options.ruleset,
        gates,
        options.targets,
        sources,
        options.select,
        options.ignore,
        options.baseline,
        packages or {},
        options.unreached,
    )


def audit_input_binaries(files: Sequence, input_name: str, options: Options, store: Cache | None = None) -> InputResult:
    """One input, all stages: gates with what they guard, findings, errors and binary records.

    Each file is read once up front (in the workers: digest for the cache, suppression marker,
    and for C/CUDA files without a cache their structure); later stages read again only the
    files they need. With a cache, an unchanged input costs that read and one lookup.
    """
    files = list(files)
    return _evaluate(files, input_name, options, store, _survey(files, input_name, options, store) if store else None)


def audit_input(
    files: Sequence, input_name: str, options: Options, store: Cache | None = None
) -> tuple[list[Gate], list[Finding], list[FileError]]:
    """One input, all stages: gates with what they guard, findings, and errors."""
    r = audit_input_binaries(files, input_name, options, store)
    return r.gates, r.findings, r.errors


@dataclass(frozen=True)
class _Survey:
    """An input read once for the cache: each file's first read, and the keys of its results."""

    reads: list[Read]
    final_key: str
    """The finished result (gates with features, findings, binary records) under these options."""
    input_key: str
    """What the files and the chosen toolkits decide (the extracted gates and errors), whatever
    the other options."""


def _survey(files: list, input_name: str, options: Options, store: Cache | None = None) -> _Survey:
    def read(todo: list) -> list[Read]:
        with Workers(options.jobs, len(todo), options.progress) as workers:
            return workers.read(todo, digest=True, scan=False)

    reads = kept.first_reads(store, files, read)
    digest = input_digest((f.path, f.language, r.error or "", r.digest) for f, (r, _) in zip(files, reads))
    kits = ",".join(arch.releases_of(options.toolkits))
    return _Survey(
        reads, f"result:{digest}:{config_digest(options)}:{input_name}", f"{digest}:cuda={kits}:{input_name}"
    )


def _evaluate(
    files: list, input_name: str, options: Options, store: Cache | None, survey: _Survey | None
) -> InputResult:
    """One input's result: the one kept under its key, else computed (and kept)."""
    if store is None or survey is None:  # nothing to key results by
        return _compute(files, input_name, options, Cache(None), None)
    return store.memo(survey.final_key, FINAL, lambda: _compute(files, input_name, options, store, survey))


def _compute(files: list, input_name: str, options: Options, store: Cache, survey: _Survey | None) -> InputResult:
    """One input through every stage. The Python pass runs in the background from the start
    (without a cache, beside the workers' first read of the files, which scans the C/CUDA
    ones too); meanwhile the C/CUDA gates are evaluated. Their reach needs the Python gates;
    then the two halves are judged (features, evidence, findings) side by side. Rules see one
    file's gates and suppression comments at a time, so the two halves add up."""
    key = survey.input_key if survey else ""
    with Workers(options.jobs, len(files), options.progress) as workers:
        kept = store.recall(f"python:{key}", EXTRACTED)
        first = survey.reads if survey else None
        pending = (
            workers.python(_python_files(files, first), options.toolkits, store if survey else None)
            if kept is None
            else finished(kept)
        )
        reads = first if first is not None else workers.read(files, digest=False, scan=True)
        readable = [f for f, (r, _) in zip(files, reads) if r.error is None]
        marked = [f for f, (r, _) in zip(files, reads) if r.marker]
        listings, bin_errors = read_binaries(readable, input_name, open_file)
        binaries = binary_records(listings, input_name, options.targets)
        packages = binary_verdicts(binaries)

        def judging(
            found: tuple[list[Gate], list[FileError]], sources: list, summaries: dict | None = None
        ) -> Callable[[], tuple[list[Gate], list[Finding]]]:
            """The gates judged, begun: many are judged in a forked process of their own, which
            runs while this one goes on (calling the result waits for it) unless there is one
            worker; a few, here and now."""
            if len(found[0]) < APART_GATES:
                done_here = judged_here(found, sources, summaries)
                return lambda: done_here
            before = set(summaries or ())

            def work(_report: Callable) -> tuple[list[Gate], list[Finding], dict]:
                gates, findings = judged_here(found, sources, summaries)
                return gates, findings, {p: v for p, v in (summaries or {}).items() if p not in before}

            waiting = begun(work)  # what judging leaves in the allocator goes with its process

            def result() -> tuple[list[Gate], list[Finding]]:
                done = waiting()
                if done is None:
                    return judged_here(found, sources, summaries)
                if summaries is not None:
                    summaries.update(done[2])
                return done[0], done[1]

            if workers.workers == 1:  # one process at a time
                now = result()
                return lambda: now
            return result

        def judged_here(
            found: tuple[list[Gate], list[FileError]], sources: list, summaries: dict | None = None
        ) -> tuple[list[Gate], list[Finding]]:
            gates = with_features(found[0], readable, options.targets)
            gates = with_surroundings(gates, readable, options.targets)
            gates = with_lowering(gates, readable)
            gates = with_remarks(gates, readable, options.targets)
            gates = with_arguments(gates, readable, options.targets)
            gates = with_extensions(gates, readable, binaries, open_file, summaries)
            gates = held_once(with_platform(gates, readable, options.targets))
            return gates, apply_rules(gates, sources, options, packages)

        c_key = f"cuda:{key}:{','.join(t.label for t in options.targets)}"
        c_found = store.recall(c_key, EXTRACTED)
        c_only = _c_key(files, survey.reads, options) if survey else ""
        keep: Keep | None = None
        evaluated: tuple[list[Gate], list[FileError]] | None = None
        if c_found is None:  # beside the Python pass
            if survey:
                reads = _scanned(files, reads, store, workers)
                keep = Keep(store, c_only, {f.path: r.digest for f, (r, _) in zip(files, survey.reads)})
            evaluated = c_evaluated(files, reads, input_name, options.toolkits, keep)
        python = workers.wait(pending)
        if kept is None:
            python = _placed(python, input_name)
            store.keep(f"python:{key}", EXTRACTED, python)
        if c_found is None:
            c_found = cuda_gates(
                files, reads, input_name, options.toolkits, python[0], options.targets, keep, evaluated
            )
            store.keep(c_key, EXTRACTED, c_found)
        evaluated, reads = None, []  # let the gates before reach and the C/CUDA structures go
        c_sources = [f for f in marked if f.language != "python"]
        # what the C/CUDA gates found with reach and the other files decide their features and findings
        judged_key = (
            f"c-judged:{c_only}:{input_name}:{json_digest(EXTRACTED.encode(c_found))}:{config_digest(options)}"
            if survey
            else ""
        )
        kept_c = store.recall(judged_key, FINAL) if survey else None
        c_judged = judging(c_found, c_sources) if kept_c is None else lambda: (kept_c.gates, kept_c.findings)
        python = (_imported(python[0], files), python[1])
        keys = _summary_keys(files, survey.reads) if survey else {}
        kept_summaries = store.get_many(list(keys.values())) if keys else {}
        summaries = {p: kept_summaries[k] for p, k in keys.items() if k in kept_summaries}
        known = set(summaries)
        py_gates, py_findings = judging(python, [f for f in marked if f.language == "python"], summaries)()
        python[0].clear()
        store.put_many([(keys[p], v) for p, v in summaries.items() if p not in known and p in keys])
        c_gates, c_findings = c_judged()  # judged beside the Python gates
        if kept_c is None and survey:
            store.keep(judged_key, FINAL, InputResult(c_gates, c_findings, [], ()))
        c_found[0].clear()  # judged apart, the gates came back as copies: these can go
    findings = sorted(c_findings + py_findings, key=lambda f: (f.input, f.file, f.line, f.rule))
    return InputResult(c_gates + py_gates, findings, c_found[1] + python[1] + bin_errors, binaries)


def _imported(gates: list[Gate], files: Sequence) -> list[Gate]:
    """The Python gates, those in vendored trees nothing imports marked (:func:`.reach.modules`)."""
    by_path = {f.path: f for f in files if f.language == "python"}
    unreached = reach.in_tests(by_path) | reach.modules(by_path, lambda p: _bytes(by_path[p]))
    return [replace(g, reach=unreached[g.file]) if g.file in unreached else g for g in gates]


def _c_key(files: list, reads: list[Read], options: Options) -> str:
    """What decides an input's C/CUDA gates before reach: its files other than Python ones
    (paths, contents, read errors) and the chosen toolkits."""
    digest = input_digest(
        (f.path, f.language, r.error or "", r.digest) for f, (r, _) in zip(files, reads) if f.language != "python"
    )
    return f"c-gates:{tool_digest()}:{digest}:cuda={','.join(arch.releases_of(options.toolkits))}"


def _summary_keys(files: list, reads: list[Read]) -> dict[str, str]:
    """Per readable Python file, the key of its summary for the binaries' evidence
    (:func:`~auditor.facts.binaries.source_summary`): its path (its module name) and content."""
    return {
        f.path: f"pysource:{tool_digest()}:{r.digest}:{f.path}"
        for f, (r, _) in zip(files, reads)
        if f.language == "python" and r.error is None and r.digest
    }


def _scanned(files: list, reads: list[Read], store: Cache, workers: Workers) -> list[Read]:
    """The first reads, with the structure of each readable C/CUDA file: kept by its content
    digest, else scanned in the workers (a file that can no longer be read says so)."""
    todo = [i for i, (f, (r, _)) in enumerate(zip(files, reads)) if f.language == "cuda" and r.error is None]
    keys = [f"file:{tool_digest()}:{reads[i][0].digest}" for i in todo]
    found = store.memo_many(
        keys, SCANNED, lambda missing: workers.read([files[todo[j]] for j in missing], False, True, "c/cuda")
    )
    out = list(reads)
    for i, (again, scanned) in zip(todo, found):
        out[i] = (again, None) if again.error else (reads[i][0], located(scanned, files[i]))
    return out


def _python_files(files: Sequence, reads: Sequence[Read] | None) -> list:
    if reads is None:
        return [f for f in files if f.language == "python"]
    return [f for f, (r, _) in zip(files, reads) if f.language == "python" and r.error is None]


def _placed(found: tuple[list[Gate], list[FileError]], input_name: str) -> tuple[list[Gate], list[FileError]]:
    """Gates and errors kept by content, whatever the input's name, as of this input."""
    gates, errors = found
    return (
        [g if g.input == input_name else replace(g, input=input_name) for g in gates],
        [e if e.input == input_name else replace(e, input=input_name) for e in errors],
    )


def config_digest(options: Options) -> str:
    """What besides the files decides a result: targets, toolkits, rules, selection, baseline."""
    parts = [
        [repr(t) for t in options.targets],
        list(arch.releases_of(options.toolkits)),
        [
            [r.id, r.name, r.severity, list(r.languages), list(r.kinds), r.condition, r.message, r.source]
            for r in options.ruleset
        ],
        sorted(options.select),
        sorted(options.ignore),
        sorted(map(list, options.baseline)),
        options.unreached,
    ]
    return json_digest(parts)


def rule_info(rule: rulebook.Rule) -> RuleInfo:
    """What reports say about a rule."""
    return RuleInfo(
        rule.id,
        rule.name,
        Severity(rule.severity),
        rule.message,
        rule.rationale,
        rule.remediation,
        tuple(rule.references),
    )


def excerpts(gates: Sequence[Gate], files: Sequence, input_name: str) -> list[Excerpt]:
    """The lines of each file the gates' excerpts show (:func:`~auditor.model.excerpt_windows`);
    only the files with gates are read again."""
    wanted: dict[str, set[int]] = {}
    for g in gates:
        lines = wanted.setdefault(g.file, set())
        for first, last in excerpt_windows(g):
            lines.update(range(first, last + 1))
    out = []
    for f in files:
        want = wanted.get(f.path)
        if want:
            text = f.data.decode("utf-8", "replace").split("\n")
            out.append(Excerpt(input_name, f.path, tuple((n, text[n - 1]) for n in sorted(want) if n <= len(text))))
    return out


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
    ``failed_inputs``, and the other inputs are still scanned; when no input can be
    read, the first one's InputError is raised.
    """

    def __init__(self, specs: Sequence[str], options: Options = Options()):
        self.options = options
        self.failed: list[tuple[str, InputError]] = []
        self.store: Cache | None = Cache(options.cache_dir, options.cache_max) if options.cache_dir else None
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
        return _Listed(p, files, read_errors, _survey(files, p.spec, self.options, self.store))

    def result(self) -> AuditResult:
        """Every input evaluated, or read from the cache, into one result."""
        options = self.options
        gates: list[Gate] = []
        errors: list[FileError] = []
        findings: list[Finding] = []
        inputs: list[InputInfo] = []
        binaries: list[Binary] = []
        shown: list[Excerpt] = []
        for item in self.inputs:
            if isinstance(item, _Listed):
                p, files, read_errors, survey = item.provider, item.files, item.read_errors, item.survey
            else:
                listed = self._list(item)
                if listed is None:
                    continue
                (files, read_errors), p, survey = listed, item, None
            inputs.append(p.info())
            r = _evaluate(files, p.spec, options, self.store, survey)
            if options.excerpts:
                shown += excerpts(r.gates, files, p.spec)
            del files
            binaries += r.binaries
            gates += r.gates
            findings += r.findings
            errors += read_errors + r.errors
        if self.failed and not inputs:
            raise self.failed[0][1]
        for spec, exc in self.failed:
            reason = str(exc)
            errors.append(FileError("", reason[len(spec) + 2 :] if reason.startswith(f"{spec}: ") else reason, spec))
        return AuditResult(
            tool_version=__version__,
            targets=options.targets,
            inputs=tuple(sorted(inputs, key=lambda i: (i.path, i.kind))),
            gates=tuple(sorted(gates, key=lambda g: (g.input, g.file, g.line, g.kind, g.id))),
            findings=tuple(sorted(findings, key=lambda f: (f.input, f.file, f.line, f.rule, f.gate))),
            errors=tuple(sorted(set(errors), key=lambda e: (e.input, e.file, e.reason))),
            binaries=tuple(sorted(binaries, key=lambda b: (b.input, b.path))),
            failed_inputs=tuple(sorted(spec for spec, _ in self.failed)),
            rules=tuple(map(rule_info, options.ruleset)),
            excerpts=tuple(sorted(shown, key=lambda x: (x.input, x.file))),
            key=self.key,
            toolkits=arch.releases_of(options.toolkits),
        )
