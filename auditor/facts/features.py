"""What the guarded code uses: PTX instructions in ``asm`` templates, and curated identifiers.

Two sources of facts. PTX instructions are judged by what ptxas said (:mod:`.ptx`, from
``data/ptx-facts.json``). CUDA APIs, intrinsics and CuTe/CUTLASS atoms, which ptxas cannot
be asked about, are the curated rows of ``data/api-facts.csv``, each with its source, and
count only as identifiers in code. Comments, strings other than ``asm`` templates and
preprocessor lines (macro definitions and guard macros) are never features (:mod:`.code`).
"""

from __future__ import annotations

import bisect
import csv
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from typing import Any

import re2

from auditor import arch, datafiles
from auditor.arch import Capability
from auditor.facts import code, names, ptx
from auditor.model import Feature, Gate, Guards, Language, SourceFile, Target

AROUND = "around the gate, in `{}`"
"""A feature's note when it was found in the function around the gate, not under it
(:mod:`auditor.pipeline.surroundings`)."""


def is_around(f: Feature) -> bool:
    """Whether a feature was found around the gate rather than under it."""
    return f.notes.startswith(AROUND.partition("{")[0])


@dataclass(frozen=True, slots=True)
class Api:
    """One curated row: an identifier pattern and where the targets have it."""

    pattern: re.Pattern
    feature: str
    min_arch: str
    on: tuple[tuple[str, str], ...]
    notes: str


_ON_COLUMNS = {"on_sm120": "12.0", "on_sm121": "12.1"}


@cache
def apis() -> tuple[Api, ...]:
    """The curated rows in file order: the first row whose pattern is the whole identifier names it."""
    text = datafiles.read_text("api-facts.csv")
    return tuple(
        Api(
            re.compile(row["identifier"]),
            row["feature"],
            row["min_arch"],
            tuple((cap, row[col]) for col, cap in _ON_COLUMNS.items() if row[col]),
            row["notes"],
        )
        for row in csv.DictReader(io.StringIO(text))
    )


@cache
def _identifiers() -> Any:
    """Every curated identifier as one RE2 pattern, longest match first (a DFA: one pass whatever the row count)."""
    options = re2.Options()
    options.longest_match = True
    return re2.compile("|".join(rf"\b(?:{a.pattern.pattern})\b" for a in apis()), options)


_PREFILTER = re2.compile(r"\b(?:asm|__asm__|__asm)\b")
_CALL = re.compile(
    r"(?<![\w.])((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*(?:<[^;{}()<>]*(?:<[^;{}()<>]*>[^;{}()<>]*)*>)?\s*\("
)
"""A call, a function-style macro or a definition, by its (qualified) name."""
_CALL_ASCII = re2.compile(
    rb"((?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)[\t\n\x0b\x0c\r \x1c-\x1f]*"
    rb"(?:<[^;{}()<>]*(?:<[^;{}()<>]*>[^;{}()<>]*)*>)?[\t\n\x0b\x0c\r \x1c-\x1f]*\("
)
"""``_CALL`` for ASCII text in RE2 (Python's ``\\w`` and ``\\s`` spelled out), without the
lookbehind, which :func:`_calls` checks."""
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_WORD_OR_DOT = _WORD | {ord(".")}
"""What may not stand before a call's name (``_CALL``'s lookbehind, on ASCII text)."""
_PY_CALL = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\s*\(")
"""A Python call by its (dotted) name."""
_NAMES_ARCH = re.compile(r"[Ss][Mm]_?\d")
"""What an implementation named for an architecture has in its name (``Sm90``, ``sm_100``)."""
UNKNOWN_CALL = "a call the fact table does not know"
"""The pseudo-feature of a call whose needs are unknown: what the guarded code uses is then
not all known, and its classification cannot be conservative (a kernel body that reaches
``wgmma`` through templates uses more than its one visible ``mbarrier``)."""


@cache
def _neutral_calls() -> frozenset[str]:
    """Keywords, casts and calls that need nothing of the architecture (``data/neutral-calls.json``)."""
    return frozenset(datafiles.read_json("neutral-calls.json")["names"])


@lru_cache(maxsize=4096)
def _api_of(identifier: str) -> Api | None:
    return next((a for a in apis() if a.pattern.fullmatch(identifier)), None)


def scan_region(text: str, first_line: int, language: str, capabilities: tuple[str, ...]) -> list[tuple[str, Feature]]:
    """(key, feature) for each use in ``text`` (which starts at ``first_line``), in line order.

    Cheap when nothing is there: the region is lexed only when a curated identifier or
    ``asm`` appears in its raw text, which most regions do not.
    """
    if not (_identifiers().search(text) or _PREFILTER.search(text)):
        if language != "python" or not _NAMES_ARCH.search(text):
            return []
    blanked, strings = code.blank(text, language)
    found: list[tuple[int, str, Feature]] = []
    for m in _identifiers().finditer(blanked):
        api = _api_of(m.group())
        if api is not None:
            found.append((m.start(), api.feature, _api_feature(m.group(), api)))
    for offset, opcode in code.asm_instructions(text, blanked, strings):
        j = ptx.judge(opcode, capabilities)
        found.append((offset, j.variant or opcode, _ptx_feature(opcode, j)))
    if language == "python":
        found += _implementations(blanked, capabilities)
    if found:  # with nothing known, the region is of unknown needs anyway
        known = {f.token for _, _, f in found}
        for start, name in _calls(blanked):
            if name not in known and name.rpartition("::")[2] not in _neutral_calls():
                found.append((start, UNKNOWN_CALL, Feature(name, 0, UNKNOWN_CALL, "", (), "", "")))
    found.sort(key=lambda f: f[0])
    out, line, pos = [], first_line, 0
    for offset, key, f in found:
        line += blanked.count("\n", pos, offset)
        pos = offset
        out.append((key, replace(f, line=line)))
    return out


def _calls(blanked: str) -> Iterator[tuple[int, str]]:
    """(offset, name) of each match of ``_CALL`` in ``blanked``, as its ``finditer`` gives them.
    Python's engine tries the lookbehind at every offset; on ASCII text RE2 finds each
    candidate and the lookbehind is checked here (flashinfer 0.7.4's and sglang 0.5.23's
    770 MB of sources, blanked: 115 → 44 s, the same 4.3 million calls)."""
    if not blanked.isascii():
        for m in _CALL.finditer(blanked):
            yield m.start(1), m.group(1)
        return
    data = blanked.encode()
    pos = 0
    while (m := _CALL_ASCII.search(data, pos)) is not None:
        start = m.start()
        if start and data[start - 1] in _WORD_OR_DOT:
            # no match starts inside this word either: go on past it
            pos = start + 1
            while pos < len(data) and data[pos] in _WORD:
                pos += 1
            continue
        yield start, m.group(1).decode()
        pos = m.end()


def _implementations(blanked: str, capabilities: tuple[str, ...]) -> list[tuple[int, str, Feature]]:
    """Calls of implementations named for architectures (``FlashAttentionForwardSm90(...)``),
    when none is named for a requested target's generation: the region has no code of the
    target's own to run there."""
    named = [
        (m.start(1), m.group(1), names.implementation_architectures(m.group(1).rpartition(".")[2]))
        for m in _PY_CALL.finditer(blanked)
    ]
    named = [(at, name, caps) for at, name, caps in named if caps]
    wanted = {arch.generation(c) for c in capabilities}
    if not named or any(arch.generation(c) in wanted for _, _, caps in named for c in caps):
        return []
    return [
        (
            at,
            f"implementation:{name}",
            Feature(
                name,
                0,
                f"an implementation written for {', '.join(sorted(caps, key=Capability.parse))}",
                "",
                tuple((c, "no") for c in capabilities),
                "named for its architecture",
            ),
        )
        for at, name, caps in named
    ]


def _api_feature(identifier: str, api: Api) -> Feature:
    return Feature(identifier, 0, api.feature, api.min_arch, api.on, api.notes)


def _ptx_feature(opcode: str, j: ptx.Judgement) -> Feature:
    what = f"PTX {j.variant} ({j.family})" if j.variant else "PTX instruction without a probed variant"
    return Feature(opcode, 0, what, j.min_arch, j.on_target, "", j.source)


def distinct(found: Iterable[tuple[str, Feature]], limit: int = 40) -> tuple[Feature, ...]:
    """The first use of each fact (curated row, PTX variant or unprobed opcode, the first
    unknown call), at most ``limit``."""
    out: dict[str, Feature] = {}
    for key, f in found:
        if key not in out:
            out[key] = f
            if len(out) >= limit:
                break
    return tuple(out.values())


def with_features(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """The gates, with what is used inside those that exclude a requested target.

    Only excluding gates: that is where "what does the code need" decides hardware vs
    conservative, and it bounds the work (each guarded line is scanned once per file).
    """
    capabilities = tuple(dict.fromkeys(t.capability for t in targets))
    by_path = {f.path: f for f in files}
    wanted: dict[str, list[int]] = {}
    for i, g in enumerate(gates):
        first, last = g.body_lines
        if g.file in by_path and last >= first and not all(arch.admits_target(g.domain, g.admits, t) for t in targets):
            wanted.setdefault(g.file, []).append(i)
    out = list(gates)
    for path, indices in wanted.items():
        source = by_path[path]
        lines = source.data.decode("utf-8", "replace").split("\n")
        regions = {i: guarded_lines(gates[i], lines) for i in indices}
        found: list[tuple[str, Feature]] = []
        for first, last in _merge(regions.values()):
            found += scan_region("\n".join(lines[first - 1 : last]), first, source.language, capabilities)
        found_lines = [f.line for _, f in found]
        for i in indices:
            first, last = regions[i]
            lo, hi = bisect.bisect_left(found_lines, first), bisect.bisect_right(found_lines, last)
            out[i] = replace(gates[i], features=distinct(found[lo:hi]))
    return out


def guarded_lines(gate: Gate, lines: list[str]) -> tuple[int, int]:
    """The lines a gate guards. A Python rejection (``if not ok: raise``) or assertion guards
    the rest of its block: the statements after it, up to the first line indented less."""
    first, last = gate.body_lines
    at = lines[gate.line - 1] if 0 < gate.line <= len(lines) else ""
    if gate.language != Language.PYTHON or not (gate.guards == Guards.REJECT or at.lstrip().startswith("assert ")):
        return first, last
    indent = len(at) - len(at.lstrip())
    n = max(gate.line, last)
    while n < len(lines) and (not lines[n].strip() or _indent(lines[n]) > indent):
        n += 1  # the statement's own lines: its body, its continuation
    end = n
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) >= indent):
        end += 1
    return (first, last) if end == n else (min(first, n + 1) if first else n + 1, end)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or adjacent line ranges as one."""
    merged: list[list[int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return [(a, b) for a, b in merged]
