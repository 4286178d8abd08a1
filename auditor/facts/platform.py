"""System features code needs beyond its instruction set, which no machine with a part has.

ptxas assembles ``multimem.red`` for sm_120 and the driver exports ``cuMulticastCreate``
everywhere, yet a multicast object spans GPUs joined by NVSwitch, and no machine with a 12.x
part has one. Code that needs it cannot run there whatever the gate in front of it says: a
gate that keeps 12.x away from it agrees with the platform, and "widen the list" points the
wrong way (``data/platform-facts.json``). So it is with peer memory between the GPUs of one
machine (a collective over CUDA IPC): GB10, the one 12.1 part, is the only GPU in its machine.
Only code counts: comments and strings other than PTX (an ``asm`` template, a PTX string
handed to an inline-assembly call) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import re2

from auditor import datafiles
from auditor.facts import code
from auditor.model import Word


class Reach(Word):
    """What code of a gate is read for a feature."""

    GUARDED = "guarded"
    """The code behind a Python gate (:mod:`auditor.pipeline.platforms`)."""
    FILE = "file"
    """The whole file the gate is in: the feature is what the file is for (a collective over
    other GPUs' memory), so every gate in it is in front of code that needs it."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One system feature and the capabilities no system of which has it."""

    id: str
    feature: str
    reach: Reach
    ptx: re.Pattern
    identifiers: re.Pattern
    lacking: frozenset[str]
    why: str
    ascii: re2._Regexp
    """Whether the identifiers or the PTX occur at all, in one RE2 pass: exact on ASCII text,
    where RE2's ``\\b`` and ``\\w`` are Python's (the lookbehind, which RE2 lacks, becomes a
    character before the match); Python's backtracking patterns take ~60 ns a byte."""

    def present(self, text: str) -> bool:
        """Whether :func:`needs` can find this fact anywhere in ``text``."""
        if text.isascii():
            return self.ascii.search(text) is not None
        return bool(self.identifiers.search(text) or self.ptx.search(text))


NOTHING = "(?!)"
"""The pattern of a fact with no PTX instruction: it matches nowhere."""


@cache
def facts() -> tuple[Fact, ...]:
    """The facts of ``data/platform-facts.json``, patterns compiled."""
    raw = datafiles.read_json("platform-facts.json")["facts"]
    return tuple(
        Fact(
            f["id"],
            f["feature"],
            Reach(f["reach"]),
            re.compile(rf"(?<![\w.])(?:{f.get('ptx', NOTHING)})"),
            re.compile(rf"\b(?:{f['identifiers']})\b"),
            frozenset(f["lacking"]),
            f["why"],
            re2.compile(
                "|".join([rf"\b(?:{f['identifiers']})\b", *([rf"(?:^|[^\w.])(?:{f['ptx']})"] if "ptx" in f else [])])
            ),
        )
        for f in raw
    )


@dataclass(frozen=True, slots=True)
class Need:
    """A use of a system feature: what it is, and the token that shows it, where."""

    fact: Fact
    token: str
    file: str
    line: int

    def describe(self) -> str:
        """``feature: `token` (file:line)``, as a finding quotes it."""
        return f"{self.fact.feature}: `{self.token}` ({self.file}:{self.line})"


def needs(text: str, language: str, path: str, first_line: int, wanted: Iterable[Fact]) -> list[Need]:
    """The first use of each wanted feature in ``text`` (a file's lines from ``first_line``):
    an identifier in code, or a PTX instruction in an ``asm`` template (C/C++) or in a string
    (Python, where PTX reaches an inline-assembly call as a string)."""
    wanted = tuple(wanted)
    if not wanted or not any(f.present(text) for f in wanted):
        return []
    blanked, strings = code.blank(text, language)
    if language == "python":
        ptx = [(start, text[start:end]) for start, end in strings]
    else:
        ptx = list(code.asm_instructions(text, blanked, strings))
    out = []
    for fact in wanted:
        hit = fact.identifiers.search(blanked)
        found = (hit.start(), hit.group()) if hit else None
        for offset, piece in ptx:
            m = fact.ptx.search(piece)
            if m and (found is None or offset < found[0]):
                found = (offset + (m.start() if language == "python" else 0), m.group())
                break
        if found is not None:
            out.append(Need(fact, found[1], path, first_line + text.count("\n", 0, found[0])))
    return out
