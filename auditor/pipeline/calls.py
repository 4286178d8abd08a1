"""Which functions of reached vendored code nothing calls: their gates decide nothing.

A vendored header that a translation unit includes often defines helpers no file uses
(TensorRT-LLM's ``cudaUtils.h`` with its own ``elect_one_sync``, while every caller uses
CuTe's). A gate inside such a function turns no device away. A function defined in a vendored
C/C++ file is *called* when its name occurs, as a token of code (comments and string literals
blanked, macro bodies kept), in a file that can see the definition:

- who can see a definition: its file and every file that includes it, directly or through
  others (:class:`.reach.Sight`: a Python file that writes a JIT source, or a C file whose
  run-time compiled program includes the file, counts as an includer, and its strings as code);
- any occurrence is a use (a call ``name(``, a template ``name<``, a function pointer, a macro
  body), except the definition's own name, a member access (``.name``, ``->name``) and a name
  qualified by a namespace the definition is not in (``cute::name`` does not call
  ``tensorrt_llm::common::name``; a namespace alias counts as what it names). ``::name`` and a
  qualifier that is no plain name (``T<int>::name``) count;
- only free functions: methods (in a class body or any block other than a namespace or
  ``extern "C"``, or defined with a qualified name), bodies
  whose name looks like a macro (``TEST(...) {``), operators and ``main`` stay called, and so do
  files a shipped binary may compile at run time. Gates outside a function are untouched.

The package's own files are never looked at: they are its interface. The scan is token
based: an overload, a variable of the same name or a call in ``#if 0`` keeps a function
called.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import re2

from auditor.facts.code import blank
from auditor.pipeline.reach import HEADERS, Sight, closure
from auditor.sources.files import suffix_of

_BRACES = re.compile(r"[{}]")
_DIRECTIVES = re.compile(r"^[ \t]*#(?:\\\n|[^\n])*", re.M)
_BODY_BEFORE = re.compile(r"(?:\)|\b(?:const|noexcept|override|final|mutable|volatile))\s*$")
_NAMESPACE = re.compile(r"(?:^|[\s;])(?:inline\s+)?namespace(?:\s+([\w:\s]+?))?\s*$")
_EXTERN = re.compile(r"\bextern\s*$")
_WORD_BEFORE = re.compile(r"([A-Za-z_]\w*)\s*$")
_TRAILERS = frozenset({"const", "noexcept", "override", "final", "mutable", "volatile"})
_ATTRIBUTES = frozenset(
    {"noexcept", "throw", "__attribute__", "__declspec", "alignas", "requires", "__launch_bounds__", "__nv_pure__"}
)
_NOT_FUNCTIONS = frozenset(
    {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype", "static_assert", "main"}
)
_ALIAS = re2.compile(rb"\bnamespace\s+(\w+)\s*=\s*((?:::)?\s*\w+(?:\s*::\s*\w+)*)\s*;")
_MACRO_LIKE = re.compile(r"[A-Z][A-Z0-9_]*")
_STATIC = re.compile(r"\bstatic\b")


@dataclass(frozen=True, slots=True)
class Function:
    """A free function's definition: its name, where the name is, its body's lines, its namespaces."""

    name: str
    at: int
    """Offset of its name token in the file."""
    first: int
    last: int
    namespaces: frozenset[str]
    kernel: bool = False
    """A ``__global__`` function: an entry point, launched by name from host code or a string
    (``cuModuleGetFunction``, NVRTC's lowered names)."""
    local: bool = False
    """``static`` or in an anonymous namespace: only its own file can call it."""


def uncalled(
    sight: Sight,
    lines: Mapping[str, Iterable[int]],
    read: Callable[[str], bytes],
    memo: Callable[[Callable[[], CSide]], CSide] | None = None,
) -> set[tuple[str, int]]:
    """(file, line) of the given gate ``lines`` (per vendored C file) that sit in a function no
    file that can see it uses. ``read`` gives a file's bytes; a file with gates is read twice, the others once.
    ``memo`` keeps what the C files decide (:func:`c_side`: the candidates and their uses in C
    code), which the Python files' uses then complete."""
    side = memo(lambda: c_side(sight, lines, read)) if memo is not None else c_side(sight, lines, read)
    if not side.candidates:
        return set()
    aliases = {a: set(named) for a, named in side.aliases}
    uses: dict[str, dict[tuple[int, str | None], None]] = {}  # each (file, qualifier) of a name once
    for name, i, q in side.uses:
        uses.setdefault(name, {})[i, q] = None
    includers = _includers(sight)
    token = _name_tokens({f.name for _, found in side.candidates for f, _ in found})
    for i in sorted(_readers(sight, side.candidates, includers)):
        if i < sight.c_files:
            continue  # in the C side
        data = read(sight.files[i])
        _aliases(data, aliases)
        if not token.search(data):
            continue
        code = data.decode("latin-1")
        for start, name in _tokens(token, code):
            qualifier = _qualifier(code, start)
            if qualifier != ".":
                uses.setdefault(name, {})[i, qualifier] = None
    out: set[tuple[str, int]] = set()
    for i, found in side.candidates:
        used = [uses.get(f.name, ()) for f, _ in found]
        seen = _seen_by(sight, i, found, includers) if any(used) else range(0)
        for (f, gate_lines), users in zip(found, used):
            allowed = f.namespaces | {a for a, named in aliases.items() if named & f.namespaces}
            if not any(u in seen and (q is None or q in allowed or q in ("", "?")) for u, q in users):
                out.update((sight.files[i], line) for line in gate_lines)
    return out


def _includers(sight: Sight) -> list[list[int]]:
    """Per file of the sight, the files that include it (or whose programs do). What the
    Python files' programs include is included by one node past the files
    (``len(sight.files)``), which each Python file includes: their programs' edges are held
    once, not once per file."""
    hub = len(sight.files)
    out: list[list[int]] = [[] for _ in range(hub + 1)]
    for i, targets in enumerate(sight.edges):
        for j in targets:
            out[j].append(i)
    for j in sight.programs:
        out[j].append(hub)
    out[hub] = list(range(sight.c_files, hub))
    return out


def _by_inclusion(sight: Sight, i: int, found: Iterable[tuple[Function, Any]]) -> bool:
    """Whether only the files that include candidate file ``i`` can see its functions: a
    header's, or a source's that are all local (a source's others have linkage: any unit may
    declare them)."""
    return suffix_of(sight.files[i]) in HEADERS or all(f.local for f, _ in found)


def _seen_by(sight: Sight, i: int, found: Iterable[tuple[Function, Any]], includers: list[list[int]]) -> Container[int]:
    """The files that can see the functions of candidate file ``i``. Computed when asked, one
    file at a time: held for every candidate of an environment, they were millions of entries."""
    if not _by_inclusion(sight, i, found):
        return range(sight.c_files)
    seen = closure([i], includers)
    seen.discard(len(sight.files))
    return seen


def _readers(sight: Sight, candidates: Iterable[tuple[int, Any]], includers: list[list[int]]) -> set[int]:
    """Every file that can see some candidate's functions (the union of :func:`_seen_by`)."""
    candidates = list(candidates)
    roots = [i for i, found in candidates if _by_inclusion(sight, i, found)]
    units = range(sight.c_files) if len(roots) < len(candidates) else range(0)
    seen = closure(roots, includers).union(units)
    seen.discard(len(sight.files))
    return seen


def _name_tokens(names: set[str]) -> Any:
    """The candidates' names as whole words, searched by RE2 in bytes: one automaton for
    thousands of names, where a backtracking alternation tries each name at each offset."""
    words = "|".join(re.escape(n) for n in sorted(names))
    return re2.compile(rf"\b(?:{words})\b".encode())


def _tokens(token: Any, code: str) -> Iterator[tuple[int, str]]:
    """(offset, name) of each whole-word occurrence of a name in latin-1 decoded code. A name
    beside a non-ASCII letter (``dimension\xe3``) is inside a word, as for a Unicode ``\b``."""
    for m in token.finditer(code.encode("latin-1", "replace")):
        start, end = m.span()
        if (start and _worded(code[start - 1])) or (end < len(code) and _worded(code[end])):
            continue
        yield start, m.group().decode("ascii")


def _worded(c: str) -> bool:
    """A non-ASCII word character (an ASCII one never borders an RE2 ``\b`` match)."""
    return c >= "\x80" and (c.isalnum() or c == "_")


@dataclass(frozen=True, slots=True)
class CSide:
    """What the C files decide of :func:`uncalled`: they hold the candidates (functions with
    gates), and their uses in C code; the Python files that write programs add theirs."""

    candidates: tuple[tuple[int, tuple[tuple[Function, tuple[int, ...]], ...]], ...] = ()
    """Per C file with gates in functions (index in :attr:`.Sight.files`), those functions and their gate lines."""
    aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Namespace aliases written in the C files read."""
    uses: tuple[tuple[str, int, str | None], ...] = ()
    """(name, file, qualifier) of the uses of a candidate's name in the C files that can see it, each once."""


def c_side(sight: Sight, lines: Mapping[str, Iterable[int]], read: Callable[[str], bytes]) -> CSide:
    """The C files' part of :func:`uncalled`."""
    index = {p: i for i, p in enumerate(sight.files)}
    defined_in: dict[int, set[int]] = {}  # the files with gates: offsets of definitions
    # (their code is read and blanked again for uses: held until then, it would cost their size)
    aliases: dict[str, set[str]] = {}  # namespace alias -> the last part of what it names
    candidates: dict[int, list[tuple[Function, list[int]]]] = {}
    for path, wanted in lines.items():
        i = index.get(path)
        if i is None or i in sight.opaque:
            continue
        data = read(path)
        _aliases(data, aliases)
        code = blank(data.decode("latin-1"), "cuda", directives=False)[0]
        functions = functions_of(_without_directives(code))
        defined_in[i] = {f.at for f in functions}
        starts = [f.first for f in functions]
        held: dict[int, list[int]] = {}
        for line in sorted(set(wanted)):
            k = bisect.bisect_right(starts, line) - 1
            if k >= 0 and functions[k].first <= line <= functions[k].last and not functions[k].kernel:
                held.setdefault(k, []).append(line)
        if held:
            candidates[i] = [(functions[k], gate_lines) for k, gate_lines in held.items()]
    if not candidates:
        return CSide()
    token = _name_tokens({f.name for found in candidates.values() for f, _ in found})
    readers = _readers(sight, candidates.items(), _includers(sight))
    uses: dict[tuple[str, int, str | None], None] = {}  # each once: a file may use a name thousands of times
    for i in sorted(readers):
        if i >= sight.c_files:
            continue  # a Python file: not the C side's
        data = read(sight.files[i])
        if i in defined_in:
            if not token.search(data):
                continue
            defined = defined_in[i]
            code = blank(data.decode("latin-1"), "cuda", directives=False)[0]
        else:
            _aliases(data, aliases)
            if not token.search(data):
                continue
            code = data.decode("latin-1")
            blanked = blank(code, "cuda", directives=False)[0]
            defined = {f.at for f in functions_of(_without_directives(blanked))}
            code = code if i in sight.written else blanked  # a program's strings are code too
        for start, name in _tokens(token, code):
            if start in defined:
                continue  # a definition of that name (another namespace's, an overload) calls nothing
            qualifier = _qualifier(code, start)
            if qualifier != ".":
                uses[name, i, qualifier] = None
    return CSide(
        tuple((i, tuple((f, tuple(g)) for f, g in found)) for i, found in sorted(candidates.items())),
        tuple((a, tuple(sorted(named))) for a, named in sorted(aliases.items())),
        tuple(uses),
    )


def encode_side(side: CSide) -> list:
    """A :class:`CSide` as JSON."""
    return [
        [
            [i, [[[f.name, f.at, f.first, f.last, sorted(f.namespaces), f.kernel, f.local], list(g)] for f, g in found]]
            for i, found in side.candidates
        ],
        [[a, list(named)] for a, named in side.aliases],
        [list(u) for u in side.uses],
    ]


def _function(name: str, place: tuple[int, ...], namespaces: frozenset[str], kernel, local) -> Function:
    at, first, last = place
    if type(kernel) is not bool or type(local) is not bool:
        raise ValueError("malformed")
    return Function(name, at, first, last, namespaces, kernel, local)


def decode_side(d: list) -> CSide:
    """Inverse of :func:`encode_side`; raises ValueError (or TypeError, KeyError, IndexError)
    on anything it did not write."""

    def ints(xs) -> tuple[int, ...]:
        if any(type(x) is not int for x in xs):
            raise ValueError("malformed")
        return tuple(xs)

    def text(x) -> str:
        if type(x) is not str:
            raise ValueError("malformed")
        return x

    candidates, aliases, uses = d
    return CSide(
        tuple(
            (
                ints([i])[0],
                tuple(
                    (
                        _function(text(n), ints([at, a, b]), frozenset(map(text, ns)), k, lc),
                        ints(g),
                    )
                    for (n, at, a, b, ns, k, lc), g in found
                ),
            )
            for i, found in candidates
        ),
        tuple((text(a), tuple(map(text, named))) for a, named in aliases),
        tuple((text(n), ints([i])[0], None if q is None else text(q)) for n, i, q in uses),
    )


def _qualifier(code: str, start: int) -> str | None:
    """What qualifies a name at ``start``: None (nothing), "." (a member access), "" (``::name``),
    the namespace or class before ``::``, or "?" (a qualifier that is no plain name)."""
    k = start - 1
    while k >= 0 and code[k] in " \t\r\n":
        k -= 1
    if k < 0:
        return None
    if code[k] == "." or (code[k] == ">" and k > 0 and code[k - 1] == "-"):
        return "."
    if code[k] == ":" and k > 0 and code[k - 1] == ":":
        word = _WORD_BEFORE.search(code, max(0, k - 200), k - 1)
        if word:
            return word.group(1)
        j = k - 2
        while j >= 0 and code[j] in " \t\r\n":
            j -= 1
        return "" if j < 0 or not (code[j].isalnum() or code[j] in "_>") else "?"
    return None


def functions_of(code: str, macro_names: bool = False) -> list[Function]:
    """The free functions defined in ``code`` (comments, strings and directives blanked), in
    order: outermost bodies whose enclosing blocks are all namespaces or ``extern "C"`` (not a
    class, nor a block the scan cannot name), with their namespace blocks. A body whose name
    looks like a macro (``TEST(x) {``, a kernel named ``CAKE_PROGRAM_KERNEL``) counts only with
    ``macro_names``."""
    newlines = [m.start() for m in re.finditer("\n", code)]
    line_of = lambda offset: bisect.bisect_right(newlines, offset - 1) + 1  # noqa: E731
    out: list[Function] = []
    stack: list[tuple[str, tuple[str, ...]]] = []  # ("namespace" | "extern" | "other", names)
    body: tuple[int, int, Function | None] = (-1, 0, None)  # (depth, start, function) while in a body
    depth = 0
    last = 0  # where the current declaration began (after the last ; { or } outside bodies)
    for m in _BRACES.finditer(code):
        pos = m.start()
        if body[0] >= 0:
            if m.group() == "{":
                depth += 1
            else:
                depth -= 1
                if depth == body[0]:
                    f = body[2]
                    if f is not None:
                        out.append(replace(f, first=line_of(body[1]), last=line_of(pos)))
                    body = (-1, 0, None)
                    last = pos + 1
            continue
        if m.group() == "}":
            if stack:
                stack.pop()
            last = pos + 1
            continue
        head = code[max(last, code.rfind(";", 0, pos) + 1) : pos]
        if _BODY_BEFORE.search(head.rstrip()[-64:]):  # a blanked directive may end the head
            name = _name(code, pos)
            keep = (
                name is not None
                and all(kind in ("namespace", "extern") for kind, _ in stack)
                and name[0] not in _NOT_FUNCTIONS
                and (macro_names or not _MACRO_LIKE.fullmatch(name[0]))
                and not _initializers(head)
            )
            namespaces = frozenset(n for kind, names in stack if kind == "namespace" for n in names)
            local = bool(_STATIC.search(head)) or any(kind == "namespace" and not names for kind, names in stack)
            f = Function(name[0], name[1], 0, 0, namespaces, "__global__" in head, local) if keep and name else None
            body = (depth, pos, f)
            depth += 1
            continue
        ns = _NAMESPACE.search(head)
        if ns:
            stack.append(("namespace", tuple(p.strip() for p in (ns.group(1) or "").split("::") if p.strip())))
        elif _EXTERN.search(head):  # extern "C" { (the string blanked)
            stack.append(("extern", ()))
        else:  # a class, an initializer, a macro's block: what it holds is no free function
            stack.append(("other", ()))
        last = pos + 1
    return out


def _initializers(head: str) -> bool:
    """Whether a declaration has a constructor's initializer list (a lone ``:``)."""
    return re.search(r"(?<!:):(?!:)", head) is not None


def _name(code: str, brace: int) -> tuple[str, int] | None:
    """The name of the function whose body opens at ``brace`` and its offset, or None for a
    qualified name (a method defined out of its class), an operator or a lambda."""
    k = brace
    for _ in range(8):  # trailers and attributes after the parameter list
        k -= 1
        while k >= 0 and code[k] in " \t\r\n":
            k -= 1
        if k < 0:
            return None
        if code[k] != ")":
            word = _WORD_BEFORE.search(code, max(0, k - 100), k + 1)
            if word and word.group(1) in _TRAILERS:
                k = word.start(1)
                continue
            return None
        open_at = _matching(code, k)
        if open_at is None:
            return None
        word = _WORD_BEFORE.search(code, max(0, open_at - 200), open_at)
        if not word:
            return None
        if word.group(1) in _ATTRIBUTES:
            k = word.start(1)
            continue
        j = word.start(1) - 1
        while j >= 0 and code[j] in " \t\r\n":
            j -= 1
        if j > 0 and code[j] == ":" and code[j - 1] == ":":
            return None
        if word.group(1) == "operator" or (j >= 7 and code[j - 7 : j + 1].endswith("operator")):
            return None
        return word.group(1), word.start(1)
    return None


def _matching(code: str, close: int) -> int | None:
    depth = 0
    for k in range(close, max(-1, close - 20_000), -1):
        c = code[k]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return k
    return None


def free_functions(text: str) -> list[Function]:
    """The free functions of a C/C++ file's text (:func:`functions_of`), with comments,
    strings and directives blanked first; a body named by a macro counts (the code is there)."""
    return functions_of(_without_directives(blank(text, "cuda", directives=False)[0]), macro_names=True)


def _without_directives(code: str) -> str:
    return _DIRECTIVES.sub(lambda m: " " * len(m.group()), code)


def _aliases(data: bytes, out: dict[str, set[str]]) -> None:
    """Collect ``namespace A = x::y;`` as A -> {"y"}."""
    if b"namespace" in data:
        for m in _ALIAS.finditer(data):
            out.setdefault(m.group(1).decode("latin-1"), set()).add(
                m.group(2).decode("latin-1").rsplit(":", 1)[-1].strip()
            )
