"""What the guarded code uses: tokens with known arch requirements, from ``data/ptx-features.csv``.

The fact table is data (checked against ptxas by its authors); this module only turns its
``token`` column into patterns and finds them in a guarded region. Tokens written as human
notation (``wgmma...e4m3 (FP8 wgmma)``) are turned into the pattern they describe.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import re2

from auditor.model import Feature


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
    text = resources.files("auditor").joinpath("data", "ptx-features.csv").read_text("utf-8")
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        try:
            pattern = _pattern(row["token"], row["token_kind"])
        except re.error:
            continue
        on = tuple((cap, row[col]) for col, cap in _ON_COLUMNS.items() if row.get(col))
        rows.append(Fact(row["token"], row["feature"], row["min_arch"], row["arch_specific"], on,
                         row["notes"], row["source_url"], pattern))
    rows.sort(key=lambda f: -len(f.token))
    return tuple(rows)


@cache
def _combined():
    """All facts as one RE2 pattern: a DFA scans a region once, whatever the number of facts.

    (Python's backtracking engine tries every alternative at every position: ~30 s per MB.)
    """
    return re2.compile("|".join(f"(?:{f.pattern.pattern})" for f in facts()).replace(_NOT_AFTER_WORD, r"\b"))


def scan_region(text: str, first_line: int) -> list[tuple[int, str, Fact]]:
    """(line, token, fact) for every fact found in ``text``, which starts at ``first_line``."""
    out: list[tuple[int, str, Fact]] = []
    line, pos = first_line, 0
    for m in _combined().finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        fact = next((f for f in facts() if f.pattern.match(text, m.start())), None)
        if fact is not None:
            out.append((line, m.group(0), fact))
    return out


def feature(line: int, token: str, fact: Fact) -> Feature:
    """A found fact as the model records it."""
    return Feature(token=token, line=line, feature=fact.feature, min_arch=fact.min_arch,
                   on_target=fact.on, notes=fact.notes)


def find(lines: list[str], first: int, last: int, limit: int = 40) -> tuple[Feature, ...]:
    """Facts used on lines ``first..last`` (1-based, inclusive), one per fact, in line order."""
    if last < first:
        return ()
    return distinct(scan_region("\n".join(lines[first - 1 : last]), first), limit)


def distinct(found: list[tuple[int, str, Fact]], limit: int = 40) -> tuple[Feature, ...]:
    """The first occurrence of each fact, at most ``limit``."""
    out: dict[str, Feature] = {}
    for line, token, fact in found:
        if fact.token not in out:
            out[fact.token] = feature(line, token, fact)
            if len(out) >= limit:
                break
    return tuple(out.values())
