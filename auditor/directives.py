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
_DIRECTIVE = re.compile(
    r"^[ \t]*#[ \t]*(" + "|".join(sorted(KEYWORDS, key=len, reverse=True)) + r")\b", re.M
)
# Things that can hide a '#' at line start: block comments and raw strings. Line comments,
# strings and character constants are matched only so that a '/*' inside them is skipped.
_MASKING = re.compile(
    r"""//[^\n]*|/\*.*?(?:\*/|\Z)|R"([^()\\\s"]{0,16})\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])'""",
    re.S,
)
_COMMENTS = re.compile(r"/\*.*?(?:\*/|\Z)|//.*", re.S)
_CONTINUATION = re.compile(r"\\[ \t]*\n")


@dataclass(frozen=True, slots=True)
class Directive:
    """One directive: its keyword, its text after the keyword (comments removed, one line)."""

    keyword: str
    text: str
    line: int
    end_line: int


def _hidden_spans(text: str) -> list[tuple[int, int]]:
    """Spans of block comments and raw strings (start, end), in order."""
    if "/*" not in text and 'R"' not in text:
        return []
    return [m.span() for m in _MASKING.finditer(text) if m.group(0)[:2] == "/*" or m.group(0)[:1] == "R"]


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
        start = m.start()
        while h < len(hidden) and hidden[h][1] <= start:
            h += 1
        hash_at = text.index("#", start)
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
