"""What the guarded code uses: tokens with known arch requirements, from ``data/ptx-features.csv``.

The fact table is data (checked against ptxas by its authors); this module only turns its
``token`` column into patterns and finds them in a guarded region. Tokens written as human
notation (``wgmma...e4m3 (FP8 wgmma)``) are turned into the pattern they describe.
"""

from __future__ import annotations

import bisect
import csv
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import re2

from auditor import arch
from auditor.model import Feature, Gate, SourceFile, Target


@dataclass(frozen=True, slots=True)
class Fact:
    """One row of the fact table."""

    token: str
    feature: str
    min_arch: str
    arch_specific: str
    on: tuple[tuple[str, str], ...]
    """(capability, yes|no|sm_120a-only|…) for the capabilities the table has columns for."""
    notes: str
    source_url: str
    pattern: re.Pattern


_ON_COLUMNS = {"on_sm120": "12.0", "on_sm121": "12.1"}
_NOT_AFTER_WORD = r"(?<![\w])"


def _pattern(token: str, kind: str) -> re.Pattern:
    text = re.sub(r"\s+\([^)]*\)\s*$", "", token.strip())  # drop "(description)"
    alternatives = [a.strip() for a in text.split(" / ")]
    parts = []
    for alt in alternatives:
        if kind in ("literal", "macro"):
            pieces = [re.escape(p) for p in alt.split("...")]
            body = r"[\w.:]*?".join(pieces)
        else:
            body = alt.replace("...", r"[\w.:]*?")
            body = re.sub(r"::\*", r"::\\w+", body)
        if re.match(r"\w", alt):
            body = _NOT_AFTER_WORD + f"(?:{body})"
        parts.append(body)
    return re.compile("|".join(f"(?:{p})" for p in parts))


@cache
def facts() -> tuple[Fact, ...]:
    """The fact table, most specific tokens first (longer literals before their prefixes)."""
    text = (resources.files("auditor") / "data" / "ptx-features.csv").read_text("utf-8")
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        try:
            pattern = _pattern(row["token"], row["token_kind"])
        except re.error:
            continue
        on = tuple((cap, row[col]) for col, cap in _ON_COLUMNS.items() if row.get(col))
        rows.append(
            Fact(
                row["token"],
                row["feature"],
                row["min_arch"],
                row["arch_specific"],
                on,
                row["notes"],
                row["source_url"],
                pattern,
            )
        )
    rows.sort(key=lambda f: -len(f.token))
    return tuple(rows)


def _re2_source(fact: Fact) -> str:
    """A fact's pattern in RE2 syntax (RE2 has ``\\b`` but no look-behind)."""
    return fact.pattern.pattern.replace(_NOT_AFTER_WORD, r"\b")


@cache
def _combined():
    """All facts as one RE2 pattern: a DFA scans a region once, whatever the number of facts.

    (Python's backtracking engine tries every alternative at every position: ~30 s per MB.)
    """
    return re2.compile("|".join(f"(?:{_re2_source(f)})" for f in facts()))


@cache
def _labelled() -> tuple[Any, tuple[int, ...]]:
    """The combined pattern with one capturing group per fact, and the index of each fact's group."""
    groups, index = [], 1
    for f in facts():
        groups.append(index)
        index += 1 + f.pattern.groups  # the fact's own group, then the groups inside its pattern
    return re2.compile("|".join(f"({_re2_source(f)})" for f in facts())), tuple(groups)


@lru_cache(maxsize=4096)
def _fact_of(token: str, word_before: bool, word_after: bool) -> Fact | None:
    """The fact whose alternative of the combined pattern matched ``token``.

    Leftmost-first alternation takes the first alternative that matches at a position, so
    that alternative is the first fact matching exactly ``token`` there. Only the word-ness
    of the characters on either side (for ``\\b``) matters beyond the token itself, so the
    answer is found once per (token, sides) rather than once per occurrence.
    """
    pattern, groups = _labelled()
    text = ("a" if word_before else " ") + token + ("a" if word_after else " ")
    m = pattern.fullmatch(text, 1, 1 + len(token))
    if m is None:
        return None
    return next((f for f, g in zip(facts(), groups) if m.start(g) != -1), None)


def _is_word(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (text[i].isascii() and (text[i].isalnum() or text[i] == "_"))


def scan_region(text: str, first_line: int) -> list[tuple[int, str, Fact]]:
    """(line, token, fact) for the first use of each fact on each line of ``text``, which starts at ``first_line``.

    One pass of the combined pattern; later uses of a fact on the same line are dropped
    (``distinct`` keeps the first use per fact in any range of lines), so a megabyte line
    of one token costs one entry, not 60,000.
    """
    out: list[tuple[int, str, Fact]] = []
    seen: set[str] = set()
    line, pos = first_line, 0
    for m in _combined().finditer(text):
        start, end = m.span()
        newlines = text.count("\n", pos, start)
        if newlines:
            line += newlines
            seen.clear()
        pos = start
        token = m.group(0)
        fact = _fact_of(token, _is_word(text, start - 1), _is_word(text, end))
        if fact is not None and fact.token not in seen:
            seen.add(fact.token)
            out.append((line, token, fact))
    return out


def feature(line: int, token: str, fact: Fact) -> Feature:
    """A found fact as the model records it."""
    return Feature(
        token=token, line=line, feature=fact.feature, min_arch=fact.min_arch, on_target=fact.on, notes=fact.notes
    )


def distinct(found: list[tuple[int, str, Fact]], limit: int = 40) -> tuple[Feature, ...]:
    """The first occurrence of each fact, at most ``limit``."""
    out: dict[str, Feature] = {}
    for line, token, fact in found:
        if fact.token not in out:
            out[fact.token] = feature(line, token, fact)
            if len(out) >= limit:
                break
    return tuple(out.values())


def with_features(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """The gates, with the fact-table tokens used inside those that exclude a requested target.

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
        found: list[tuple[int, str, Fact]] = []
        for first, last in _merge(gates[i].body_lines for i in indices):
            found += scan_region("\n".join(lines[first - 1 : last]), first)
        found_lines = [f[0] for f in found]
        for i in indices:
            first, last = gates[i].body_lines
            lo, hi = bisect.bisect_left(found_lines, first), bisect.bisect_right(found_lines, last)
            out[i] = replace(gates[i], features=distinct(found[lo:hi]))
    return out


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or adjacent line ranges as one."""
    merged: list[list[int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return [(a, b) for a, b in merged]
