"""Device-code gates in C/C++/CUDA files: preprocessor branches and CCCL ``NV_IF_TARGET`` arms.

:func:`scan_file` runs in worker processes and returns only structure (no evaluation: derived
macros need the whole tree). :func:`gates` then evaluates every candidate branch over the target
domain and keeps those whose own condition names an architecture.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from auditor import arch, fingerprint
from auditor.cuda import cexpr
from auditor.cuda.cccl import cccl_condition
from auditor.cuda.directives import scan
from auditor.cuda.host import HostScan
from auditor.cuda.includes import Scopes
from auditor.cuda.macros import MacroTable, names_an_arch, parse_condition
from auditor.cuda.structure import MAX_CHAIN, Branch, NestingError, Structure, StructureError
from auditor.model import Domain, FileError, Gate, GateKind, Guards, Language, Resolution, ResolvedBy, SourceFile

_CCCL = re.compile(r"NV_(IF_TARGET|IF_ELSE_TARGET|DISPATCH_TARGET)\s*\(")  # literal first: fast search
_ARCH_TOKEN = re.compile(r"__CUDA_ARCH|NV_(?:IF|DISPATCH)_")


@dataclass(frozen=True, slots=True)
class FileScan:
    """One C/CUDA file's structure, as the tree-wide stages need it."""

    path: str
    structure: Structure
    cccl: tuple[Branch, ...]
    package: str
    host: HostScan = HostScan()
    """Its host C++ capability checks (:mod:`.host`)."""
    compiles_for: tuple[str, ...] = ()
    """The targets its string literals fix a run-time compile to (``"--gpu-architecture=sm_90a"``:
    an NVRTC program built for that architecture alone)."""


def decode(f: SourceFile) -> str | FileError:
    """Source text, or a one-line reason it is not text."""
    return decode_bytes(f.path, f.data, f.input)


def decode_bytes(path: str, data: bytes, input_name: str = "") -> str | FileError:
    """:func:`decode` of a file's bytes."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # before the NUL test: UTF-16 text is full of NULs
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            return FileError(
                path, f"UTF-16 byte order mark but not UTF-16 ({exc.reason} at offset {exc.start}); skipped", input_name
            )
    if b"\0" in data[:8192]:
        return FileError(path, "binary file with a source extension (NUL bytes); skipped", input_name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # Latin-1 and other 8-bit encodings (a name in a comment): directives are ASCII, and
        # Latin-1 maps every byte to one character, so lines and directives stay exact.
        return data.decode("latin-1")


def scan_file(f: SourceFile) -> FileScan | FileError:
    """Directive structure and CCCL arms of one file (worker side)."""
    text = decode(f)
    if isinstance(text, FileError):
        return text
    return _scan_text(f, text)


def scan_bytes(path: str, data: bytes, input_name: str = "") -> FileScan | FileError | None:
    """:func:`scan_file` of a file's bytes; None when it has no directive or CCCL call (nothing
    to keep). The worker-side entry point: only this compact result leaves the worker."""
    f = SourceFile(path, b"", "cuda", input_name)
    text = decode_bytes(path, data, input_name)
    if isinstance(text, FileError):
        return text
    if "#" not in text and "_TARGET" not in text:
        return None
    scan = _scan_text(f, text)
    if isinstance(scan, FileScan) and not (
        scan.structure.branches or scan.structure.definitions or scan.structure.includes or scan.cccl
    ):
        return None
    return scan


def _scan_text(f: SourceFile, text: str) -> FileScan | FileError:
    try:
        structure = scan_structure(text)
    except NestingError as exc:
        return FileError(f.path, f"conditionals nested or chained too deep to evaluate: {exc}; skipped", f.input)
    except StructureError as exc:
        return FileError(f.path, f"unbalanced conditionals: {exc}", f.input)
    try:
        cccl = tuple(_cccl_arms(text, structure)) if "_TARGET" in text else ()
    except NestingError as exc:
        return FileError(f.path, f"conditionals nested or chained too deep to evaluate: {exc}; skipped", f.input)
    fixed = tuple(sorted({f"sm_{m}" for m in _COMPILE_ARCH.findall(text)}))
    return FileScan(f.path, structure, cccl, f.path.split("/", 1)[0], compiles_for=fixed)


_COMPILE_ARCH = re.compile(r"""["'](?:--gpu-architecture|-arch)[= ](?:sm|compute)_(\d+[af]?)["']""")
"""A run-time compile option in a string literal that fixes the architecture."""


def scan_structure(text: str) -> Structure:
    """Directives -> branches and definitions."""
    from auditor.cuda.structure import structure

    return structure(scan(text), text.count("\n") + 1, text)


class _Enclosing:
    """Constraints of the innermost branch body holding a line, asked in increasing line order.

    A sweep over the (nested or disjoint) bodies: linear, where a search per call made a file
    with 20,000 ``#if`` and 20,000 ``NV_IF_TARGET`` quadratic.
    """

    def __init__(self, structure: Structure):
        self.spans = sorted(structure.enclosing, key=lambda s: (s[0], -s[1]))
        self.next = 0
        self.open: list[tuple[int, int, tuple]] = []

    def __call__(self, line: int):
        while self.next < len(self.spans) and self.spans[self.next][0] <= line:
            span = self.spans[self.next]
            self.next += 1
            while self.open and self.open[-1][1] < span[0]:
                self.open.pop()
            if span[1] >= span[0]:
                self.open.append(span)
        while self.open and self.open[-1][1] < line:
            self.open.pop()
        return self.open[-1][2] if self.open else ()


_BRACKET = re.compile(r"[()\[\]{},]")


def _calls(text: str, opens: set[int]) -> dict[int, list[tuple[int, str]]]:
    """Top-level arguments (offset, text) of each macro call whose '(' is in ``opens``.

    One pass with a stack over every bracket (any kind closes any kind, as before); a call
    left unclosed has no entry. Scanning from each call instead was quadratic on a line of
    unclosed or nested calls.
    """
    out: dict[int, list[tuple[int, str]]] = {}
    commas: dict[int, list[int]] = {}
    stack: list[int] = []
    for m in _BRACKET.finditer(text):
        c, pos = m.group(), m.start()
        if c in "([{":
            stack.append(pos)
        elif c == ",":
            if stack and stack[-1] in opens:
                commas.setdefault(stack[-1], []).append(pos)
        elif stack:
            start = stack.pop()
            if start in opens:
                bounds = [start, *commas.pop(start, []), pos]
                out[start] = [(a + 1, text[a + 1 : b]) for a, b in zip(bounds, bounds[1:])]
    return out


def _cccl_arms(text: str, structure: Structure) -> Iterable[Branch]:
    newlines = [m.start() for m in re.finditer("\n", text)] if _CCCL.search(text) else []
    line_of = lambda off: bisect.bisect_right(newlines, off - 1) + 1  # noqa: E731
    matches = [
        m
        for m in _CCCL.finditer(text)
        if not (m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_"))
    ]
    calls = _calls(text, {m.end() - 1 for m in matches}) if matches else {}
    enclosing = _Enclosing(structure)
    line_info = (-1, 0, -1)  # (line number, offset of its first non-blank char, offset of its first '//')
    for m in matches:
        number = line_of(m.start())
        if line_info[0] != number:
            line_start = newlines[number - 2] + 1 if number > 1 else 0
            line_end = newlines[number - 1] if number - 1 < len(newlines) else len(text)
            line = text[line_start:line_end]
            line_info = (number, line_start + len(line) - len(line.lstrip()), text.find("//", line_start, line_end))
        _, first, comment = line_info
        if (first < m.start() and text[first] == "#") or (comment != -1 and comment + 2 <= m.start()):
            continue  # the macro's own definition, or a comment
        args = calls.get(m.end() - 1)
        if args is None:
            continue  # unclosed macro call
        arms: list[tuple[tuple[int, str] | None, tuple[int, str]]]
        if m.group(1) == "DISPATCH_TARGET":
            arms = list(zip(args[0::2], args[1::2]))
        elif len(args) >= 2:
            arms = [(args[0], args[1])] + ([(None, args[2])] if len(args) >= 3 else [])
        else:
            continue
        inherited = enclosing(number)
        if len(inherited) + len(arms) > MAX_CHAIN:
            raise NestingError(f"NV_DISPATCH_TARGET at line {number} has {len(arms)} arms")
        earlier: list[tuple[str, str]] = []  # (query as written, its condition)
        for query, (b_off, body) in arms:
            body_lines = (line_of(b_off), line_of(b_off + len(body)))
            local = tuple((c, False) for _, c in earlier)
            if query is None:
                expr = " && ".join(f"!{q}" for q, _ in earlier)
                yield Branch("NV_else", expr, body_lines[0], body_lines[0], body_lines, inherited, local)
                continue
            q_off, q = query
            q = q.strip()
            # An unknown query stays in the chain as an unknown identifier.
            cond = cccl_condition(q) or (q if re.fullmatch(r"\w+", q) else "__archaudit_unknown_query")
            at = line_of(q_off + len(query[1]) - len(query[1].lstrip()))
            yield Branch("NV_" + m.group(1), q, at, at, body_lines, inherited, local + ((cond, True),))
            earlier.append((q, cond))


def gates(scans: Sequence[FileScan], scopes: Scopes, input_name: str, errors: list[FileError]) -> list[Gate]:
    """Evaluate every branch, each file with the macro definitions it can see; keep those that
    name an architecture."""
    out: list[Gate] = []
    targets = arch.target_order()
    resolved: dict[tuple[int, str], Resolution] = {}
    for fs in scans:
        table, evaluator = scopes.of(fs.path)
        ordinals: dict[tuple[str, str], int] = {}
        for b in sorted(fs.structure.branches + fs.cccl, key=lambda b: b.line):
            try:
                nodes = [parse_condition(c) for c, _ in b.local]
            except cexpr.ConditionError as exc:
                if _ARCH_TOKEN.search(b.expression):
                    errors.append(FileError(fs.path, f"line {b.line}: cannot parse condition ({exc})", input_name))
                continue
            if not any(names_an_arch(n, table.naming) for n in nodes):
                continue
            try:
                reach, unknowns, derived, toolkits = evaluator.effective(b.inherited + b.local)
            except cexpr.ConditionError as exc:
                errors.append(
                    FileError(fs.path, f"line {b.line}: cannot evaluate enclosing condition ({exc})", input_name)
                )
                continue
            local_ids = set().union(*(cexpr.identifiers(n) for n in nodes))
            kind = (
                GateKind.CCCL_TARGET
                if b.keyword.startswith("NV_")
                else (GateKind.DERIVED_MACRO if local_ids & table.derived else GateKind.PREPROCESSOR)
            )
            expression = " ".join(b.expression.split())
            key = (kind, expression)
            ordinal = ordinals.get(key, 0)
            ordinals[key] = ordinal + 1
            names = sorted(derived)
            if len(names) > MAX_RESOLUTIONS:  # a chain of 3,000 derived macros: do not list 3,000 per gate
                direct = [n for n in names if n in local_ids]
                names = (direct + [n for n in names if n not in local_ids])[: MAX_RESOLUTIONS - 1]
            for n in names:
                if (id(table), n) not in resolved:
                    resolved[id(table), n] = Resolution(n, *_where(table, n))
            resolutions = tuple(resolved[id(table), n] for n in names)
            if len(derived) > len(names):
                resolutions += (
                    Resolution(
                        "...", "", 0, f"more derived macros, not listed (the report keeps {MAX_RESOLUTIONS} per gate)"
                    ),
                )
            out.append(
                Gate(
                    id=fingerprint.gate_id(fs.path, kind, "", expression, ordinal),
                    file=fs.path,
                    line=b.line,
                    end_line=b.end_line,
                    language=Language.CUDA,
                    kind=kind,
                    expression=expression,
                    domain=Domain.TARGET,
                    admits=tuple(t for t, r in zip(targets, reach) if r is not False),
                    unknowns=tuple(sorted(unknowns)),
                    resolved_by=ResolvedBy.DEFINITION if derived else ResolvedBy.LITERAL,
                    resolutions=resolutions,
                    chain=tuple(c if pol else f"!({c})" for c, pol in b.inherited + b.local),
                    body_lines=b.body,
                    guards=Guards.DEFINE if b.defines else Guards.TAKE,
                    toolkits=toolkits,
                    input=input_name,
                    package=fs.package,
                )
            )
    return out


MAX_RESOLUTIONS = 100
"""Derived macros listed per gate (flashinfer 0.7.4 needs at most 29); the evaluation uses all."""


def _where(table: MacroTable, name: str) -> tuple[str, int, str]:
    path, d = table.where(name)
    cond = " && ".join(c if pol else f"!({c})" for c, pol in d.constraints) or "always"
    return path, d.line, f"defined where {cond}"
