"""Find preprocessor directives with a line scanner, not a parser.

Whole-file parses of CUDA fail in almost every real file (launch syntax, macros, templates)
and cost ~40 s on a site-packages tree; directives are line-oriented, so a regex finds
candidate lines and a second pass drops those inside block comments or raw strings.
Continuation lines and comments inside the directive are handled here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEYWORDS = ("if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif", "define", "undef")
# Starts with a literal '#', so the regex engine skips ahead with a fast search; whether the
# '#' starts its line is checked afterwards.
_DIRECTIVE = re.compile(r"#[ \t]*(" + "|".join(sorted(KEYWORDS, key=len, reverse=True)) + r")\b")
_RAW_STRING = re.compile(r'R"([^()\\\s"]{0,16})\(')
_COMMENTS = re.compile(r"/\*.*?(?:\*/|\Z)|//.*", re.S)
_CONTINUATION = re.compile(r"\\[ \t]*\n")


@dataclass(frozen=True, slots=True)
class Directive:
    """One directive: its keyword, its text after the keyword (comments removed, one line)."""

    keyword: str
    text: str
    line: int
    end_line: int


def _opens_code(text: str, pos: int) -> bool:
    """Whether ``pos`` on its line is in code, not in a ``//`` comment or a string literal."""
    prefix = text[text.rfind("\n", 0, pos) + 1 : pos]
    if "//" in prefix:
        return False
    quotes = len(re.findall(r'(?<!\\)"', prefix)) - prefix.count("'\"'")
    return quotes % 2 == 0


def _hidden_spans(text: str) -> list[tuple[int, int]]:
    """Spans of block comments and raw strings (start, end), in order.

    A loop over ``str.find`` rather than a tokenizing regex: only the (few) openers matter,
    and a regex that matches every string and line comment costs half the scan.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        start = text.find("/*", pos)
        if start == -1:
            break
        if spans and start < spans[-1][1] or not _opens_code(text, start):
            pos = start + 2
            continue
        end = text.find("*/", start + 2)
        end = len(text) if end == -1 else end + 2
        spans.append((start, end))
        pos = end
    if 'R"' in text:
        for m in _RAW_STRING.finditer(text):
            if _opens_code(text, m.start()) and not any(a <= m.start() < b for a, b in spans):
                close = text.find(")" + m.group(1) + '"', m.end())
                spans.append((m.start(), len(text) if close == -1 else close + len(m.group(1)) + 2))
        spans.sort()
    return spans


def scan(text: str) -> list[Directive]:
    """Every conditional, ``#define`` and ``#undef`` directive of a file, in order."""
    matches = list(_DIRECTIVE.finditer(text))
    if not matches:
        return []
    hidden = _hidden_spans(text)
    out: list[Directive] = []
    h = 0
    line, pos = 1, 0
    for m in matches:
        start = text.rfind("\n", 0, m.start()) + 1
        if text[start : m.start()].strip(" \t"):
            continue  # '#' not at the start of its line (a string, a stringizing operator)
        while h < len(hidden) and hidden[h][1] <= start:
            h += 1
        hash_at = m.start()
        if h < len(hidden) and hidden[h][0] <= hash_at < hidden[h][1]:
            continue
        end = _logical_end(text, m.end(), hidden, h)
        line += text.count("\n", pos, start)
        pos = start
        body = text[m.end() : end]
        end_line = line + body.count("\n")
        body = _COMMENTS.sub(" ", _CONTINUATION.sub(" ", body))
        out.append(Directive(m.group(1), " ".join(body.split()), line, end_line))
    return out


def _logical_end(text: str, pos: int, hidden: list[tuple[int, int]], h: int) -> int:
    """End of the directive's logical line: continuations and multi-line comments joined."""
    while True:
        nl = text.find("\n", pos)
        if nl == -1:
            return len(text)
        # A block comment that opens on this line and closes later extends the directive.
        while h < len(hidden) and hidden[h][1] <= pos:
            h += 1
        if h < len(hidden) and hidden[h][0] < nl < hidden[h][1]:
            pos = hidden[h][1]
            continue
        j = nl - 1
        while j >= pos and text[j] in " \t\r":
            j -= 1
        if j >= pos and text[j] == "\\":
            pos = nl + 1
            continue
        return nl
