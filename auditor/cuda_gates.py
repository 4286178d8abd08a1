"""Device-code gates in C/C++/CUDA files: preprocessor branches and CCCL ``NV_IF_TARGET`` arms.

:func:`scan_file` runs in worker processes and returns only structure (no evaluation: derived
macros need the whole tree). :func:`gates` then evaluates every candidate branch over the target
domain and keeps those whose own condition names an architecture.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Iterable, Union

from auditor import arch, cexpr, fingerprint
from auditor.directives import scan
from auditor.model import FileError, Gate, Resolution, SourceFile
from auditor.preprocessor import (
    Branch, Evaluator, MacroTable, Structure, StructureError, cccl_condition, names_an_arch, parse_condition,
)

_CCCL = re.compile(r"NV_(IF_TARGET|IF_ELSE_TARGET|DISPATCH_TARGET)\s*\(")  # literal first: fast search
_ARCH_TOKEN = re.compile(r"__CUDA_ARCH|NV_(?:IF|DISPATCH)_")


@dataclass(frozen=True, slots=True)
class FileScan:
    """One C/CUDA file's structure, as the tree-wide stages need it."""

    path: str
    structure: Structure
    cccl: tuple[Branch, ...]
    package: str


def decode(f: SourceFile) -> Union[str, FileError]:
    """Source text, or a one-line reason it is not text."""
    data = f.data
    if b"\0" in data[:8192]:
        return FileError(f.path, "binary file with a source extension (NUL bytes); skipped", f.input)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return FileError(f.path, "UTF-16 text is not supported; convert the file to UTF-8", f.input)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FileError(f.path, f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); skipped", f.input)


def scan_file(f: SourceFile) -> Union[FileScan, FileError]:
    """Directive structure and CCCL arms of one file (worker side)."""
    text = decode(f)
    if isinstance(text, FileError):
        return text
    try:
        structure = scan_structure(text)
    except StructureError as exc:
        return FileError(f.path, f"unbalanced conditionals: {exc}", f.input)
    cccl = tuple(_cccl_arms(text, structure)) if "_TARGET" in text else ()
    return FileScan(f.path, structure, cccl, f.path.split("/", 1)[0])


def scan_structure(text: str) -> Structure:
    """Directives -> branches and definitions."""
    from auditor.preprocessor import structure

    return structure(scan(text), text.count("\n") + 1)


def _enclosing(structure: Structure, line: int):
    """Constraints of the innermost branch body holding ``line``."""
    best = ()
    best_span = None
    for first, last, constraints in structure.enclosing:
        if first <= line <= last and (best_span is None or last - first < best_span):
            best, best_span = constraints, last - first
    return best


def _split_args(text: str, start: int) -> tuple[list[tuple[int, str]], int]:
    """Top-level arguments of a macro call whose '(' is at ``start``: (offset, text) each."""
    depth, i, arg_start = 0, start, start + 1
    args: list[tuple[int, str]] = []
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append((arg_start, text[arg_start:i]))
                return args, i
        elif c == "," and depth == 1:
            args.append((arg_start, text[arg_start:i]))
            arg_start = i + 1
        i += 1
    raise ValueError("unclosed macro call")


def _cccl_arms(text: str, structure: Structure) -> Iterable[Branch]:
    newlines = [m.start() for m in re.finditer("\n", text)] if _CCCL.search(text) else []
    line_of = lambda off: bisect.bisect_right(newlines, off - 1) + 1  # noqa: E731
    for m in _CCCL.finditer(text):
        if m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_"):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        prefix = text[line_start : m.start()]
        if prefix.lstrip().startswith("#") or "//" in prefix:
            continue  # the macro's own definition, or a comment
        try:
            args, end = _split_args(text, m.end() - 1)
        except ValueError:
            continue
        if m.group(1) == "DISPATCH_TARGET":
            arms = list(zip(args[0::2], args[1::2]))
        elif len(args) >= 2:
            arms = [(args[0], args[1])] + ([(None, args[2])] if len(args) >= 3 else [])
        else:
            continue
        inherited = _enclosing(structure, line_of(m.start()))
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
            line = line_of(q_off + len(query[1]) - len(query[1].lstrip()))
            yield Branch("NV_" + m.group(1), q, line, line, body_lines, inherited, local + ((cond, True),))
            earlier.append((q, cond))


def gates(scans: Iterable[FileScan], table: MacroTable, evaluator: Evaluator, input_name: str,
          errors: list[FileError]) -> list[Gate]:
    """Evaluate every branch; keep those that name an architecture."""
    out: list[Gate] = []
    targets = arch.target_order()
    for fs in scans:
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
                reach, unknowns, derived = evaluator.effective(b.inherited + b.local)
            except cexpr.ConditionError as exc:
                errors.append(FileError(fs.path, f"line {b.line}: cannot evaluate enclosing condition ({exc})", input_name))
                continue
            local_ids = set().union(*(cexpr.identifiers(n) for n in nodes))
            kind = "cccl-target" if b.keyword.startswith("NV_") else (
                "derived-macro" if local_ids & table.derived else "preprocessor")
            expression = " ".join(b.expression.split())
            key = (kind, expression)
            ordinal = ordinals.get(key, 0)
            ordinals[key] = ordinal + 1
            resolutions = tuple(
                Resolution(name, *_where(table, name)) for name in sorted(derived)
            )
            out.append(Gate(
                id=fingerprint.gate_id(fs.path, kind, "", expression, ordinal),
                file=fs.path, line=b.line, end_line=b.end_line, language="cuda", kind=kind,
                expression=expression, domain="target",
                admits=tuple(t for t, r in zip(targets, reach) if r is not False),
                unknowns=tuple(sorted(unknowns)),
                resolved_by="definition" if derived else "literal",
                resolutions=resolutions,
                chain=tuple(c if pol else f"!({c})" for c, pol in b.inherited + b.local),
                body_lines=b.body, input=input_name, package=fs.package,
            ))
    return out


def _where(table: MacroTable, name: str) -> tuple[str, int, str]:
    path, d = table.where(name)
    cond = " && ".join(c if pol else f"!({c})" for c, pol in d.constraints) or "always"
    return path, d.line, f"defined where {cond}"
