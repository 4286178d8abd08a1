"""Find preprocessor directives with a line scanner, not a parser.

Whole-file parses of CUDA fail in almost every real file (launch syntax, macros, templates)
and cost ~40 s on a site-packages tree; directives are line-oriented, so a regex finds
candidate lines and a second pass drops those inside block comments or raw strings.
Continuation lines and comments inside the directive are handled here.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

KEYWORDS = ("if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif", "define", "undef", "include")
UNCONDITIONAL = ("define", "undef", "include")
"""Directives that open no branch: definitions, and the includes that scope them."""
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


_QUOTE = re.compile(r'(?<!\\)"')


class _OpensCode:
    """Whether ``pos`` on its line is in code, not in a ``//`` comment or a string literal.

    Called with increasing positions; each line is read once, so a 1 MB line holding
    100,000 candidates costs one pass, not one pass per candidate.
    """

    def __init__(self, text: str):
        self.text = text
        self.start = self.end = self.upto = -1  # current line [start, end); counted up to `upto`
        self.quotes = 0
        self.comment = False

    def __call__(self, pos: int) -> bool:
        text = self.text
        if not self.start <= pos <= self.end or pos < self.upto:
            self.start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            self.end = len(text) if end == -1 else end
            self.upto, self.quotes, self.comment = self.start, 0, False
        if not self.comment:
            self.comment = text.find("//", max(self.start, self.upto - 1), pos) != -1
            self.quotes += len(_QUOTE.findall(text, self.upto, pos)) - text.count("'\"'", self.upto, pos)
        self.upto = pos
        return not self.comment and self.quotes % 2 == 0


def _hidden_spans(text: str) -> list[tuple[int, int]]:
    """Spans of block comments and raw strings (start, end), in order.

    A loop over ``str.find`` rather than a tokenizing regex: only the (few) openers matter,
    and a regex that matches every string and line comment costs half the scan.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    opens_code = _OpensCode(text)
    while True:
        start = text.find("/*", pos)
        if start == -1:
            break
        if spans and start < spans[-1][1] or not opens_code(start):
            pos = start + 2
            continue
        end = text.find("*/", start + 2)
        end = len(text) if end == -1 else end + 2
        spans.append((start, end))
        pos = end
    if 'R"' in text:
        comments = [a for a, _ in spans]
        raw: list[tuple[int, int]] = []
        opens_code = _OpensCode(text)
        for m in _RAW_STRING.finditer(text):
            s = m.start()
            if raw and s < raw[-1][1]:
                continue  # inside the previous raw string
            c = bisect.bisect_right(comments, s) - 1
            if (c >= 0 and s < spans[c][1]) or not opens_code(s):
                continue
            close = text.find(")" + m.group(1) + '"', m.end())
            raw.append((s, len(text) if close == -1 else close + len(m.group(1)) + 2))
        spans = sorted(spans + raw)
    return spans


def scan(text: str) -> list[Directive]:
    """Every conditional, ``#define``, ``#undef`` and ``#include`` directive of a file, in order."""
    matches = list(_DIRECTIVE.finditer(text))
    if not matches:
        return []
    hidden = _hidden_spans(text)
    out: list[Directive] = []
    h = 0
    line, pos = 1, 0
    start, prev, last_end = 0, 0, -1
    for m in matches:
        # Line start found incrementally: a 1 MB line of '#if' tokens stays one pass.
        nl = text.rfind("\n", prev, m.start())
        same_line = nl == -1 and prev > 0
        start = nl + 1 if nl != -1 else start
        prev = m.start()
        if same_line or text[start : m.start()].strip(" \t"):
            continue  # '#' not at the start of its line (a string, a stringizing operator)
        if start < last_end:
            continue  # a continuation line of the previous directive, not a directive
        while h < len(hidden) and hidden[h][1] <= start:
            h += 1
        hash_at = m.start()
        if h < len(hidden) and hidden[h][0] <= hash_at < hidden[h][1]:
            continue
        end = last_end = _logical_end(text, m.end(), hidden, h)
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


def code_lines(text: str, directives: list[Directive]) -> list[int]:
    """Lines that hold code: not blank, not only comment, not one of the scanned directives.

    Other directives (``#pragma``, ``#error``) count as code. What a branch whose body holds
    none of these lines does is only the ``#define``s in it."""
    hidden = [(a, b) for a, b in _hidden_spans(text) if text.startswith("/*", a)]
    if hidden:
        parts, pos = [], 0
        for a, b in hidden:
            parts += [text[pos:a], re.sub(r"[^\n]", " ", text[a:b])]
            pos = b
        text = "".join(parts) + text[pos:]
    directive = {n for d in directives for n in range(d.line, d.end_line + 1)}
    return [n for n, line in enumerate(text.split("\n"), 1) if n not in directive and line.split("//", 1)[0].strip()]
