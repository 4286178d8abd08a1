"""Which text of a region is code, and which strings are PTX; fast line scans of whole files.

Comments, string literals and preprocessor lines say nothing about what the compiled code
needs (a log message mentioning ``bf16``, a ``#define`` naming a guard macro), so features
are only looked for in what is left. The one string that *is* code is an ``asm`` template.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator

_NOT_CODE = {
    "cuda": r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'",
    "python": r"#[^\n]*|\"\"\".*?\"\"\"|'''.*?'''|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'",
}
_DIRECTIVE = {"cuda": r"|^[ \t]*#(?:\\\n|[^\n])*", "python": ""}
_FLAGS = {"cuda": re.S | re.M, "python": re.S}
_LEXEMES = {k: re.compile(v + _DIRECTIVE[k], _FLAGS[k]) for k, v in _NOT_CODE.items()}
"""What is not code, per language: comments, string and character literals, preprocessor lines."""
_KEPT_DIRECTIVES = {k: re.compile(v, _FLAGS[k]) for k, v in _NOT_CODE.items()}
"""The same without preprocessor lines: a macro body is code where the macro is used."""

_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\s*(?:(?:volatile|__volatile__|inline|goto)\b\s*)*\(")
_ESCAPE = re.compile(r"\\(.)", re.S)
_LEAD = re.compile(r"(?:\s|[{}]|[A-Za-z_$][\w$]*:(?!:))*")
"""What may precede an instruction in a statement: scope braces and labels."""
_INSTRUCTION = re.compile(r"(?:@!?%*\w+\s+)?([a-z][\w.:]*)")
"""An optional predicate guard, then the opcode with its qualifiers."""


def blank(text: str, language: str, directives: bool = True) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with everything but code blanked (same length, same lines), and the spans of its
    string literals. ``directives=False`` keeps preprocessor lines (their comments and strings
    blanked)."""
    table = _LEXEMES if directives else _KEPT_DIRECTIVES
    lexemes = table.get(language, table["cuda"])
    parts, strings, pos = [], [], 0
    for m in lexemes.finditer(text):
        start, end = m.span()
        parts.append(text[pos:start])
        parts.append("\n".join(" " * len(piece) for piece in m.group().split("\n")))
        if text[start] == '"':
            strings.append((start, end))
        pos = end
    parts.append(text[pos:])
    return "".join(parts), strings


def asm_instructions(text: str, code: str, strings: list[tuple[int, int]]) -> Iterator[tuple[int, str]]:
    """(offset in ``text``, opcode) for every instruction of every ``asm`` template in ``code``.

    A template is the string literals right after ``asm(``, up to the first ``:`` or ``)``;
    adjacent literals are one string (CUTLASS splits an opcode from its operands). Statements
    end at ``;``; braces, labels, directives (``.reg``) and predicate guards are not opcodes.
    """
    starts = [s for s, _ in strings]
    for m in _ASM.finditer(code):
        pos, size = m.end(), 0
        pieces: list[str] = []
        offsets: list[tuple[int, int]] = []  # (offset in the template, offset in text) of each literal
        for start, end in itertools.islice(strings, bisect.bisect_left(starts, pos), None):
            if any(c in code[pos:start] for c in ":);"):
                break
            offsets.append((size, start))
            pieces.append(_ESCAPE.sub(lambda e: " " if e[1] in "nt" else e[1], text[start + 1 : end - 1]))
            size, pos = size + len(pieces[-1]), end
        at = 0
        for statement in "".join(pieces).split(";"):
            lead = _LEAD.match(statement)
            found = _INSTRUCTION.match(statement, lead.end() if lead else 0)
            if found:
                piece = bisect.bisect_right(offsets, (at + found.start(1), len(text))) - 1
                yield offsets[piece][1], found.group(1)
            at += len(statement) + 1


def line_matches(pattern: re.Pattern[bytes], data: bytes, word: bytes) -> Iterator[re.Match[bytes]]:
    """What ``pattern.finditer(data)`` finds, for a pattern anchored at a line start (``re.M``)
    whose every match holds ``word`` on its first line: tried only at the lines holding the
    word. A search anchored at every line start costs five to ten times as much."""
    pos = 0
    while (i := data.find(word, pos)) >= 0:
        m = pattern.match(data, data.rfind(b"\n", 0, i) + 1)
        if m is not None and m.end() > i:
            yield m
            pos = m.end()
        else:  # no match, or one that ended before this word (a comment after it)
            pos = len(data) if (end := data.find(b"\n", i)) < 0 else end
