"""Python architecture gates: the entry point of :mod:`auditor.python`.

Reading order of the work: a byte search picks the files that mention an arch token; those
are parsed (once each) into a program with symbol tables; the names they define that other
files may call (predicates, flags, instance attributes) widen the byte search until no new
file turns up; then every relevant scope is walked once, for all device capabilities at
once (:mod:`auditor.python.scan`), and the gates are read off.
"""

from __future__ import annotations

import bisect
import gc
import multiprocessing
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from auditor import arch, fingerprint, model
from auditor.apart import apart
from auditor.facts import names
from auditor.fingerprint import content_digest, json_digest
from auditor.model import Language
from auditor.python.gates import Found, scan_module
from auditor.python.interp import Interp
from auditor.python.lists import list_tokens, scan_lists
from auditor.python.models import models
from auditor.python.symbols import Module, Program, Reads, Words, word_in, word_pattern, word_starts
from auditor.python.syntax import child
from auditor.python.values import Cap, Func, Props, SelfRef, Val, capability, is_boolish

_MAX_ROUNDS = 6
_BATCH = 16
"""Modules read with one evaluator; fewer than two batches are read in the calling process."""
TREES = 8 << 20
"""Bytes of source whose parsed trees a process keeps between evaluators (≈ 23 bytes of tree
per byte): above it, the least recently used are released, and parsed again when used."""
APART_FILES = 200
"""A program of this many Python files or more learns its predicates in a process of its own
(:func:`auditor.apart.apart`), which hands back what :func:`_replay` needs; below it the fork
costs more than the memory it gives back."""
TOO_DEEP = "python expression nested too deeply to evaluate; skipped"


Progress = Callable[[str, int, int], None] | None
"""Called as (step, done, total): ``parse`` per file parsed, ``evaluate`` per batch of modules read."""


def extract(
    files: Sequence[model.SourceFile],
    jobs: int = 1,
    progress: Progress = None,
    toolkits: tuple[str, ...] = (),
    kept: Kept | None = None,
    salt: str = "",
) -> tuple[list[model.Gate], list[model.FileError]]:
    """Gates and unreadable files among the Python files of one input: the program is loaded
    once (:func:`load`), then its modules are read (:func:`read`, with what ``kept`` holds of
    the last scan) under the chosen CUDA ``toolkits`` (empty: every known one)."""
    python = [f for f in files if f.path.endswith(".py") or f.language == "python"]
    prog, relevant = load(python, progress, kept, salt)
    return read(prog, relevant, {f.path: f.input for f in python}, jobs, progress, toolkits, kept, salt)


class Kept(Protocol):
    """Where the evaluations of batches of modules are kept between scans (the pipeline's
    result cache behind it). An entry is looked up by what the batch is (its modules' paths
    and contents, the predicates learned, the toolkits) and used only when what its
    evaluation read of the rest of the program is unchanged (:meth:`Program.still_reads`)."""

    def recall(self, keys: Sequence[str]) -> dict[str, Evaluated]:
        """The entries found among ``keys``."""
        ...

    def keep(self, items: Sequence[tuple[str, Evaluated]]) -> None:
        """Keep these entries for the next scan."""
        ...

    def get(self, key: str) -> Any:
        """A JSON entry, or None."""
        ...

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The JSON entries found among ``keys``."""
        ...

    def put_many(self, items: Sequence[tuple[str, Any]]) -> None:
        """Keep these JSON entries."""
        ...


@dataclass(frozen=True, slots=True)
class Evaluated:
    """One batch of modules evaluated, and what the evaluation depended on."""

    gates: tuple[model.Gate, ...]
    errors: tuple[model.FileError, ...]
    """The batch's own modules that could not be evaluated."""
    loaded: tuple[model.FileError, ...]
    """The errors of the modules the evaluation loaded on the way."""
    modules: tuple[tuple[str, str], ...]
    """(path, content digest) of every module the evaluation read."""
    by_name: tuple[tuple[str, tuple[str, ...]], ...]
    """What its lookups by name found (:attr:`Reads.by_name`)."""


def read(
    prog: Program,
    relevant: Relevance,
    inputs: dict[str, str],
    jobs: int = 1,
    progress: Progress = None,
    toolkits: tuple[str, ...] = (),
    kept: Kept | None = None,
    salt: str = "",
    isolated: bool = True,
) -> tuple[list[model.Gate], list[model.FileError]]:
    """The gates of a loaded program's modules, read off in batches of neighbours (by path:
    they tend to call the same predicates), each batch with an evaluator of its own, in
    ``jobs`` forked processes that inherit the parsed trees (they cannot be pickled). The
    batches do not depend on ``jobs``, so neither do the gates. ``inputs``: input name by path.

    Each batch starts from the program as loaded (the modules an evaluation loads on the way
    are taken out after it), so its result is a function of its modules and of what it read:
    with ``kept``, a batch whose modules and reads are unchanged since the last scan is not
    evaluated again (``salt`` names the tool that kept it). ``isolated=False`` is the way
    before that (each process keeps what its batches load, nothing is kept), for the tests
    that hold the two to the same gates."""
    if not isolated:
        kept = None
    paths = sorted(prog.by_path)
    batches = [paths[i : i + _BATCH] for i in range(0, len(paths), _BATCH)]
    forked = jobs > 1 and len(batches) > 1 and "fork" in multiprocessing.get_all_start_methods()
    keys = [_batch_key(prog, relevant, inputs, toolkits, salt, b) for b in batches] if kept is not None else []
    done: dict[int, Evaluated] = {}
    if kept is not None:
        found = kept.recall(keys)
        digests: dict[str, str] = {}
        for i, key in enumerate(keys):
            hit = found.get(key)
            if hit is not None and _still(prog, hit, digests):
                done[i] = _named(hit, inputs)
    todo = [i for i in range(len(batches)) if i not in done]

    def size(i: int) -> int:
        return -sum(len(prog.by_path[p].data) for p in batches[i])

    global _LOADED
    _LOADED = (prog, relevant, inputs, toolkits, isolated)
    prog.trim(0)  # each batch parses the trees it uses again
    # The loaded program lives until the end: frozen, the cyclic collector stops re-walking its
    # millions of objects on every collection (a fifth of the reading time), and forked
    # readers do not copy its pages to update their collector headers.
    gc.freeze()
    try:
        if forked and len(todo) > 1:
            todo.sort(key=size)  # the largest batches first, so that no worker is left with a big one at the end
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                parts = _counted(pool.imap(_read_modules, [batches[i] for i in todo], chunksize=1), len(todo), progress)
        else:
            parts = _counted(map(_read_modules, [batches[i] for i in todo]), len(todo), progress)
    finally:
        _LOADED = None
        gc.unfreeze()
    fresh = {}
    for i, (gates, errors, loaded, reads) in zip(todo, parts):
        modules = tuple(sorted((p, prog.file_digest(p)) for p in reads.modules))
        fresh[i] = done[i] = Evaluated(
            tuple(gates), tuple(errors), tuple(loaded), modules, tuple(sorted(reads.by_name.items()))
        )
    if kept is not None and fresh:
        kept.keep([(keys[i], e) for i, e in sorted(fresh.items())])
    order = sorted(done, key=size) if forked else sorted(done)
    gates = [g for i in order for g in done[i].gates]
    errors = list(prog.errors)
    if not forked:  # the modules loaded on the way list their errors, as when one process evaluated every batch
        for i in order:
            errors += [e for e in done[i].loaded if e not in errors]
    errors += [e for i in order for e in done[i].errors]
    gates.sort(key=lambda g: (g.file, g.line, g.id))
    errors.sort(key=lambda e: e.file)
    return gates, errors


def _batch_key(
    prog: Program, relevant: Relevance, inputs: dict[str, str], toolkits: tuple[str, ...], salt: str, batch: list[str]
) -> str:
    """What a batch is: its modules (path, content), and what decides any evaluation here:
    the predicates learned, the toolkits, the program's files (imports resolve by them). Not
    the input's name: two revisions of one tree share what they have in common."""
    if relevant.files_digest is None:
        relevant.files_digest = json_digest(prog.paths())
    parts = [
        list(toolkits),
        sorted(relevant.known),
        relevant.files_digest,
        [[p, prog.file_digest(p)] for p in batch],
    ]
    return f"python-batch:{salt}:{json_digest(parts)}"


def _named(e: Evaluated, inputs: dict[str, str]) -> Evaluated:
    """A kept batch with the gates and errors named after this scan's inputs."""

    def errors(rows: tuple[model.FileError, ...]) -> tuple[model.FileError, ...]:
        return tuple(replace(x, input=inputs.get(x.file, "")) for x in rows)

    return replace(
        e,
        gates=tuple(replace(g, input=inputs.get(g.file, "")) for g in e.gates),
        errors=errors(e.errors),
        loaded=errors(e.loaded),
    )


def _still(prog: Program, e: Evaluated, digests: dict[str, str]) -> bool:
    """Whether a kept evaluation still holds: every module it read unchanged, and its lookups too."""
    for path, digest in e.modules:
        now = digests.get(path)
        if now is None:
            now = digests[path] = prog.file_digest(path)
        if now != digest:
            return False
    return prog.still_reads(Reads(by_name=dict(e.by_name)))


def _counted(parts: Iterable, total: int, progress: Progress) -> list:
    out = []
    for part in parts:
        out.append(part)
        if progress:
            progress("evaluate", len(out), total)
    return out


_LOADED: tuple[Program, Relevance, dict[str, str], tuple[str, ...], bool] | None = None
"""(program, relevance, input names, chosen toolkits, isolated) while :func:`extract` reads modules (forked workers inherit it)."""


def _read_modules(
    paths: Sequence[str],
) -> tuple[list[model.Gate], list[model.FileError], list[model.FileError], Reads]:
    """One batch of modules, in path order, with one evaluator (its caches shared by the batch):
    its gates and errors, the errors of the modules it loaded, and what it read."""
    assert _LOADED is not None
    prog, relevant, inputs, toolkits, isolated = _LOADED
    lists = list_tokens()
    gates: list[model.Gate] = []
    errors: list[model.FileError] = []
    reads = prog.begin() if isolated else Reads()
    it = Interp(prog, relevant, toolkits)
    try:
        for path in paths:
            mod = prog.by_path[path]
            reads.modules.add(path)
            try:
                found = scan_module(it, mod, relevant)
                if lists.search(mod.data):
                    found += scan_lists(it, mod)
            except RecursionError:
                errors.append(model.FileError(path, TOO_DEEP, inputs.get(path, "")))
                it = Interp(prog, relevant, toolkits)  # what the abandoned evaluation left behind is not reused
                continue
            gates += _finish(mod, found, inputs.get(path, ""))
    finally:
        loaded = prog.rewind() if isolated else []
        del it
        prog.trim(TREES)
    return gates, errors, loaded, reads


def load(files: Sequence[model.SourceFile], progress: Progress = None, kept: Kept | None = None, salt: str = ""):
    """Parse the files that matter: those with arch tokens, then those that name a predicate
    the parsed ones define, until no new predicate turns up.

    A *predicate* here is any module-level function or assigned name (or predicate-named
    method) whose value depends on the arch when evaluated — found by evaluating it, not by
    its text, so that the callers of callers of a capability check do not all count.
    Returns the program (with the files it could not read) and the relevance test.

    With ``kept``, what a load of the same files did is kept (which files it loaded, in what
    order, and the predicates it learned); a load whose loaded files are all unchanged, and
    whose other files import the same words, replays it instead of learning again.
    """
    tokens = names.table().tokens
    prog = Program(files)
    relevant = Relevance(names.table().relevant)
    pending, rest = _split(files, tokens, prog.errors)
    key = ""
    if kept is not None:
        key = f"python-load:{salt}:{_split_digest(files, pending, rest, prog.errors)}"
        entry = kept.get(key)
        if entry is not None:
            again = _replay(files, pending, prog.errors, entry, _kept_parses(kept, salt, entry))
            if again is not None:
                return again
    if len(files) >= APART_FILES:  # the learning's leavings go with its process
        done = apart(lambda report: _learned(prog, relevant, pending, rest, report), progress)
        again = _replay(files, pending, prog.errors, done[0], _handed(done[1])) if done is not None else None
        if done is not None and again is not None:
            if kept is not None:
                _keep(kept, key, salt, *done)
            return again
    entry, parses = _learned(prog, relevant, pending, rest, progress)
    if kept is not None:
        _keep(kept, key, salt, entry, parses)
    prog.log, prog.parses = None, []
    return prog, relevant


def _keep(kept: Kept, key: str, salt: str, entry: dict, parses: list[tuple[tuple | None, Any]]) -> None:
    """What a load did, and each module it loaded summarised (kept by its path and content): a
    replay of it (:func:`_replay`) then parses none of them."""
    loads = [(path, digest) for op, path, digest in entry["log"] if op == "load"]
    summaries = [
        (_module_key(salt, path, digest), {"module": Module.summarised(summary).encoded(), "error": _reason(error)})
        for (path, digest), (summary, error) in zip(loads, parses)
        if summary is not None
    ]
    kept.put_many([(key, entry), *summaries])


def _handed(parses: Sequence[tuple[tuple | None, Any]]) -> Parsed:
    """What a load that ran elsewhere parsed (:func:`_learned`), one entry per load, in order."""
    loads = iter(parses)

    def parsed(f: model.SourceFile, what: str) -> tuple[Module | None, model.FileError | None] | None:
        summary, error = next(loads, (None, None))
        return (Module.summarised(summary), error) if summary is not None else None

    return parsed


def _kept_parses(kept: Kept, salt: str, entry: Any) -> Parsed | None:
    """What the loads a replay replays parsed, as far as the cache holds it (:func:`_keep`)."""
    try:
        keys = [_module_key(salt, str(path), str(what)) for op, path, what in entry["log"] if op == "load"]
    except (KeyError, TypeError, ValueError):
        return None
    found = kept.get_many(keys)

    def parsed(f: model.SourceFile, what: str) -> tuple[Module | None, model.FileError | None] | None:
        d = found.get(_module_key(salt, f.path, what))
        if d is None or content_digest(f.data) != what:
            return None
        try:
            mod = Module.decoded(f.path, f.data, what, d["module"])
            error = None if d["error"] is None else model.FileError(f.path, str(d["error"]), f.input)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return mod, error

    return parsed


def _module_key(salt: str, path: str, digest: str) -> str:
    return f"python-module:{salt}:{path}:{digest}"


def _reason(error: model.FileError | None) -> str | None:
    return None if error is None else error.reason


def _learned(prog: Program, relevant: Relevance, pending: list, rest: list, progress: Progress) -> tuple[dict, list]:
    """What :func:`_learn` did, as :func:`_replay` replays it: the files it loaded and the
    modules it dropped, in order, and the predicates it learned; and what each load parsed,
    summarised (the replay need not parse them again)."""
    prog.log = []
    known = _learn(prog, relevant, pending, rest, progress)
    parses = [(None if m is None else m.summary(), error) for m, error in prog.parses]
    return {"log": [list(e) for e in prog.log], "known": sorted(known)}, parses


def _learn(prog: Program, relevant: Relevance, pending: list, rest: list, progress: Progress) -> set[str]:
    """Load ``pending`` and learn the predicates they define, then load the files of ``rest``
    whose words name one of them, and so on until no new predicate turns up; the predicates."""
    known: set[str] = set()
    settled: dict[tuple[str, int, int], frozenset[str]] = {}
    """Units found to be no predicate (by :func:`_where`), with their words: looked at again
    only when they name something new."""
    fresh: set[str] = set()
    seen: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        loaded = []
        for i, f in enumerate(pending):
            m = prog.load(f)
            prog.trim(TREES)
            if m is not None:
                loaded.append(m)
            if progress:
                progress("parse", i + 1, len(pending))
        # what a settled unit may now reach: the predicates just learned, and whatever the newly
        # loaded modules define (a method on an opaque receiver is found by its name)
        news = fresh | {n for m in loaded for n in m.names}
        fresh = set()
        # a module looked at before is looked at again only if it names something new: else
        # each of its units is settled, or binds nothing unknown, or is still irrelevant
        named = word_pattern(news)
        mods = [
            m for m in prog.by_path.values() if m.path not in seen or (named is not None and word_in(named, m.data))
        ]
        seen.update(m.path for m in mods)
        for start in range(0, len(mods), _BATCH):
            # an evaluator per batch of modules, as when reading them, so that the trees it
            # parsed can be released after it
            it = Interp(prog, relevant)
            for mod in mods[start : start + _BATCH]:
                if not relevant.anywhere(mod):
                    continue  # no unit or class of it is relevant: its tree is not parsed again
                try:
                    for node, scope, bound in mod.units:
                        where = _where(mod, node)
                        if where in settled and not settled[where] & news:
                            continue
                        todo = [n for n in bound if n not in known and n not in fresh and _exported(node, n, scope)]
                        if todo and relevant(mod, node):
                            if _is_predicate(it, mod, node, scope, todo[0]):
                                fresh.update(todo)
                            else:
                                settled[where] = _words(node)
                    fresh.update(_instance_predicates(it, mod, known | fresh, settled, news))
                except RecursionError:  # the evaluator recurses along the syntax tree
                    prog.drop(mod, TOO_DEEP)
            del it
            prog.trim(TREES)
        if not fresh:
            break
        known |= fresh
        relevant.learn(fresh, known)
        pending = [f for f, words in rest if words & fresh]
        rest = [(f, words) for f, words in rest if not words & fresh]
    return known


def _split_digest(files: Sequence, pending: list, rest: list, errors: list) -> str:
    """What decides the loading besides the contents of the files loaded: the files, which of
    them hold an arch token, and the words of the others' imports."""
    words = {f.path: sorted(w) for f, w in rest}
    hit = {f.path for f in pending}
    bad = {e.file: e.reason for e in errors}
    return json_digest([[f.path, "hit" if f.path in hit else bad.get(f.path) or words.get(f.path, [])] for f in files])


Parsed = Callable[[model.SourceFile, str], "tuple[Module | None, model.FileError | None] | None"]
"""What a load parsed of a file whose bytes have this digest, when known (else None: it is
parsed again)."""


def _replay(
    files: Sequence, pending: list, errors: list, entry, parsed: Parsed | None = None
) -> tuple[Program, Relevance] | None:
    """The program as a load before left it, when every file it loaded is unchanged: the same
    files loaded and modules dropped in the same order, the same predicates learned, without
    learning them again. None when a file it loaded has changed (or the entry is no such
    record). ``parsed``: what each load parsed, summarised, where known (:func:`_handed`,
    :func:`_kept_parses`); each other file is parsed again."""
    try:
        log = [(str(op), str(path), str(what)) for op, path, what in entry["log"]]
        known = {str(n) for n in entry["known"]}
    except (KeyError, TypeError, ValueError):
        return None
    prog = Program(files)
    prog.errors.extend(errors)
    relevant = Relevance(names.table().relevant)
    given = {f.path: f for f in pending}
    for op, path, what in log:
        if op == "load":
            f = given.get(path) or prog.source(path)
            if f is None:
                return None
            m = prog.load(f, parsed(f, what) if parsed is not None else None)
            prog.trim(TREES)
            if (m.digest if m is not None else content_digest(f.data)) != what:
                return None
        elif op == "drop" and path in prog.by_path:
            prog.drop(prog.by_path[path], what)
        else:
            return None
    if known:
        relevant.learn(known, known)
    return prog, relevant


def _instance_predicates(it: Interp, mod: Module, known: set[str], settled: dict, news: set[str]) -> set[str]:
    """Instance attributes that hold a predicate's value (``self.use_fp8 = is_sm90_supported()``),
    so that the methods testing ``self.use_fp8`` count as relevant."""
    out = set()
    for qual, info in mod.classes.items():
        if not it.relevant(mod, info.node):
            continue
        for attr, sites in info.instance_attrs().items():
            if attr in known or attr in out:
                continue
            fresh_sites = [rhs for rhs, _, _ in sites if (w := settled.get(_where(mod, rhs))) is None or w & news]
            if not any(it.relevant(mod, rhs) for rhs in fresh_sites):
                continue
            it.on(capability(arch.capabilities()[-2]))
            v = it.instance_attr(mod, SelfRef(mod.name, qual), attr)
            if _predicate_value(v) or (v.taint is not None and all(type(x) is int for x in v.elems)):  # an SM number
                out.add(attr)
            else:
                settled.update((_where(mod, rhs), _words(rhs)) for rhs, _, _ in sites)
    return out


def _where(mod: Module, node) -> tuple[str, int, int]:
    """A node by place, which holds when its module's tree is parsed again (its id does not)."""
    return mod.path, node.start_byte, node.end_byte


def _words(node) -> frozenset[str]:
    """The identifiers a unit mentions (to tell when something it names is new)."""
    return frozenset(w.decode() for w in _IDENTIFIER.findall(node.text))


def _is_predicate(it: Interp, mod: Module, node, scope: str, name: str) -> bool:
    """Whether the name a unit binds is a truth value or a capability that depends on the arch
    (evaluated on one capability: the dependence, not the verdict, matters here). Other
    arch-dependent values (a backend name chosen by arch) are gates where they are decided."""
    it.on(capability(arch.capabilities()[-2]))
    inner = child(node, "definition") if node.type == "decorated_definition" else node
    if inner.type == "function_definition":
        if names.promised(name) is None and mod.data.find(b"return", inner.start_byte, inner.end_byte) < 0:
            return False  # it returns None: its value cannot be a truth value or a capability
        return _predicate_value(it.call_func(Func(mod.name, inner.start_byte, name, bound=bool(scope)), [], {}))
    v = it.global_value(mod, name)
    if v.taint is not None:
        return _predicate_value(v)
    return any(_predicate_value(it.call_func(x, [], {})) for x in v.elems if isinstance(x, Func))


def _predicate_value(v) -> bool:
    """A truth value or a capability (also as ``major*10+minor``, a major, or a plain tuple),
    or a truth value with its reason, that depends on the arch: what a caller may test,
    whatever it names the result."""
    return v.taint is not None and (
        is_boolish(v)
        or all(isinstance(x, (Cap, Props)) or _capability_number(x) for x in v.elems)
        or all(_verdict_pair(x) for x in v.elems)
    )


def _verdict_pair(x) -> bool:
    """``(ok, why)``, as ``return False, "FA3 needs 9.x"`` gives: callers test ``[0]`` or unpack it."""
    return isinstance(x, tuple) and len(x) == 2 and is_boolish(Val(frozenset({x[0]})))


def _capability_number(x) -> bool:
    if isinstance(x, tuple):
        return bool(x) and all(_capability_number(e) for e in x)
    return type(x) is int


class Relevance:
    """Whether a definition may matter: it mentions an arch token or a predicate's name. Match
    positions are found once per file and pattern; a test is a bisection."""

    def __init__(self, tokens: Any) -> None:
        self.tokens = tokens
        self.words: Words | None = None
        self.known: frozenset[str] = frozenset()
        """The predicate names learned."""
        self.files_digest: str | None = None
        """Of the program's file list, once a batch key needs it."""
        self.hits: dict[str, tuple[bytes, list[int]]] = {}

    def _hits(self, mod: Module) -> list[int]:
        entry = self.hits.get(mod.path)
        if entry is None:
            hits = [m.start() for m in self.tokens.finditer(mod.data)]
            if self.words is not None:
                hits += word_starts(self.words, mod.data)
            entry = self.hits[mod.path] = (mod.data, sorted(hits))
        return entry[1]

    def learn(self, fresh: set[str], known: set[str]) -> None:
        """New predicate names: add their positions to the files seen so far."""
        pattern = word_pattern(fresh)
        for path, (data, hits) in self.hits.items():
            more = word_starts(pattern, data) if pattern is not None else []
            if more:
                self.hits[path] = (data, sorted(hits + more))
        self.words = word_pattern(known)
        self.known = frozenset(known)

    def __call__(self, mod: Module, node) -> bool:
        return self.within(mod, node.start_byte, node.end_byte)

    def anywhere(self, mod: Module) -> bool:
        """Whether any definition of ``mod`` may matter."""
        return bool(self._hits(mod))

    def within(self, mod: Module, start: int, end: int) -> bool:
        starts = self._hits(mod)
        i = bisect.bisect_left(starts, start)
        return i < len(starts) and starts[i] < end


def _not_source(data: bytes) -> str:
    """Why bytes named ``.py`` are no Python source at all (the byte search would pass them
    over in silence), or ``""``. Python reads UTF-8 or a declared 8-bit encoding, never UTF-16."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text: Python source must be UTF-8 or declare an ASCII-compatible encoding; skipped"
    if b"\0" in data[:8192]:
        return "binary file with a source extension (NUL bytes); skipped"
    return ""


def _split(files, pattern: Any, errors: list) -> tuple[list, list]:
    """Each file read once: (files with an arch token, their bytes in hand; (file, the words
    of its imports) for the others, which are read again only if they import a predicate).
    Files that are no Python source go to ``errors``. ``pattern``: RE2 (one pass a file)."""
    hit, miss = [], []
    for f in files:
        data = f.data  # a LazyFile reads its bytes here
        reason = _not_source(data)
        if reason:
            errors.append(model.FileError(f.path, reason, f.input))
        elif pattern.search(data):
            hit.append(model.SourceFile(f.path, data, "python", f.input))
        else:
            miss.append((f, imported(data)))
    return hit, miss


_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def imported(data: bytes) -> set[str]:
    """Words of a file's import statements: a file calls a predicate defined elsewhere by
    importing it (a module-attribute call ``utils.pred()`` is not followed this way). Found
    from the ``import`` keywords alone, so a file costs a few literal searches."""
    out: set[str] = set()
    pos = data.find(b"import")
    while pos >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        if data.find(b"(", pos, end) >= 0:
            close = data.find(b")", pos)
            end = len(data) if close < 0 else close
        for w in _IDENTIFIER.findall(data, start, end):
            out.add(w.decode())
        pos = data.find(b"import", end)
    return out


def _exported(node, name: str, scope: str) -> bool:
    """Names other files may call: functions and assigned names at module level, and methods
    named like a predicate (``current_platform.is_blackwell()``) or private to their class (its
    own methods call them: ``self._use_fast()``); classes and imports are reached through
    them. Not ``_``, the name a value is thrown away under
    (``_MAJOR, _ = torch.cuda.get_device_capability()``): learned, every function that
    throws a value away (``for _ in …``) would count as one that may matter."""
    if name.startswith("__") or name == "_":
        return False
    kind = child(node, "definition").type if node.type == "decorated_definition" else node.type
    if scope:
        platform = models().platform_classes.search(scope.rsplit(".", 1)[-1]) is not None
        private = name.startswith("_")  # a helper its class calls on itself: ``self._use_tilelang(q)``
        return kind == "function_definition" and (names.promised(name) is not None or platform or private)
    return kind in ("function_definition", "expression_statement")


def _finish(mod: Module, found: list[Found], input_name: str) -> list[model.Gate]:
    """Ids (ordinal among identical gates of a file, in source order) and the Gate records."""
    found = sorted(found, key=lambda g: (g.line, g.col, g.kind, g.expression))
    counts: dict[tuple, int] = {}
    out = []
    for g in found:
        key = (g.kind, g.context, fingerprint.normalise(g.expression))
        ordinal = counts.get(key, 0)
        counts[key] = ordinal + 1
        out.append(
            model.Gate(
                id=fingerprint.gate_id(mod.path, g.kind, g.context, g.expression, ordinal),
                file=mod.path,
                line=g.line,
                end_line=g.end_line,
                language=Language.PYTHON,
                kind=g.kind,
                expression=g.expression,
                domain=g.domain,
                admits=g.admits,
                unknowns=g.unknowns,
                resolved_by=g.resolved_by,
                resolutions=g.resolutions,
                chain=g.chain,
                context=g.context,
                guards=g.guards,
                surely=g.surely,
                name_implies=g.name_implies,
                body_lines=g.body_lines,
                toolkits=g.toolkits,
                settled=g.settled,
                input=input_name,
                package=mod.path.split("/", 1)[0],
            )
        )
    return out
