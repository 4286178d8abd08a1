"""The scanned Python program: each file parsed once into a module with a symbol table.

A module knows the names its top level binds (definitions, assignments, imports — all of
them, joined when evaluated: module globals are read after import, whatever branch bound
them), the classes it defines, and where its definitions start so a function value can be
found again. Imports are resolved inside the input by dotted name, relative or absolute;
a tree whose package sits under a folder (``python/sglang/...``) still resolves
``sglang.srt.utils`` by suffix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

import re2
import tree_sitter_python
from tree_sitter import Language, Node, Parser, Query, QueryCursor

from auditor.fingerprint import content_digest
from auditor.model import FileError, SourceFile
from auditor.python import recover
from auditor.python.syntax import child, method_kind, text_of

_PY2 = ("print_statement", "exec_statement")


@cache
def language() -> Language:
    return Language(tree_sitter_python.language())


@cache
def parser() -> Parser:
    return Parser(language())


def module_name(path: str) -> tuple[str, bool]:
    """``flashinfer/utils.py`` -> (``flashinfer.utils``, False); ``a/__init__.py`` -> (``a``, True)."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


@dataclass(frozen=True, slots=True)
class Binding:
    """One place a name is bound: ``value`` (an expression, destructured by ``path``),
    ``def``, ``class``, ``import`` (of ``target``) or ``opaque`` (loop variables and the like)."""

    kind: str
    node: Node | None = None
    path: tuple = ()
    target: str = ""
    start: int = -1
    """A ``def`` taken from :attr:`Module.tops`: where it starts (its node is not at hand)."""


@dataclass(frozen=True, slots=True)
class MethodDef:
    """A method as the program's index holds it: its class, name, span and kind (:func:`method_kind`)."""

    qual: str
    name: str
    start: int
    end: int
    kind: str


_BARE = ("def", "import", "opaque")


def _of(kind: type | tuple[type, ...], x: Any) -> Any:
    """``x`` read back from JSON, if it is of ``kind`` (a bool is no int)."""
    if isinstance(x, kind) and not isinstance(x, bool):
        return x
    raise TypeError(f"expected {kind}, not {type(x).__name__}")


def _bare(b: Binding) -> int | str | None:
    """A binding without its node: a definition's start byte, an import's target, or None (opaque)."""
    if b.kind == "def" and b.node is not None:
        return b.node.start_byte
    return b.target if b.kind == "import" else None


@dataclass(slots=True)
class ClassInfo:
    module: str
    qualname: str
    node: Node
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    bases: tuple[str, ...] = ()
    _instance: dict[str, list[tuple[Node, tuple, Node]]] | None = None

    def instance_attrs(self) -> dict[str, list[tuple[Node, tuple, Node]]]:
        """``self.x = value`` in the methods: per attribute, (value, index path, method) of each
        assignment (``self.a, self.b = ...`` gives index paths). Found on first use."""
        if self._instance is None:
            self._instance = {}
            for stmt in child(self.node, "body").named_children:
                fn = child(stmt, "definition") if stmt.type == "decorated_definition" else stmt
                if fn is not None and fn.type == "function_definition":
                    _instance_assignments(fn, self._instance)
        return self._instance


def _instance_assignments(fn: Node, out: dict) -> None:
    params = fn.child_by_field_name("parameters")
    first = next((c for c in params.named_children if c.type == "identifier"), None) if params is not None else None
    if first is None:
        return
    me = first.text
    stack = list(child(fn, "body").named_children)
    while stack:
        n = stack.pop()
        if n.type in ("function_definition", "class_definition", "decorated_definition", "lambda"):
            continue
        if n.type == "assignment":
            targets: list[Node] = []
            rhs: Node | None = n
            while rhs is not None and rhs.type == "assignment":
                targets.append(child(rhs, "left"))
                rhs = rhs.child_by_field_name("right")
            if rhs is not None:
                for target in targets:
                    items = (
                        [(target, ())]
                        if target.type == "attribute"
                        else [(c, (i,)) for i, c in enumerate(target.named_children)]
                        if target.type in ("pattern_list", "tuple_pattern", "expression_list", "tuple")
                        else []
                    )
                    for t, path in items:
                        obj = child(t, "object") if t.type == "attribute" else None
                        if obj is not None and obj.type == "identifier" and obj.text == me:
                            out.setdefault(text_of(child(t, "attribute")), []).append((rhs, path, fn))
                stack.append(rhs)
            continue
        stack.extend(n.named_children)


@dataclass(slots=True)
class Tree:
    """What a module's syntax tree gives: held while evaluations use the module, dropped
    between them (:meth:`Module.release`) and parsed again when asked for."""

    root: Node
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    units: list[tuple[Node, str, tuple[str, ...]]] = field(default_factory=list)
    defs: dict[int, Node] = field(default_factory=dict)
    assigned: dict[int, frozenset[str]] = field(default_factory=dict)


class Held:
    """The modules of a program whose trees are held, and the turn (one per evaluator) that
    each was last used in (:meth:`Program.trim`)."""

    __slots__ = ("modules", "turn")

    def __init__(self) -> None:
        self.modules: dict[Module, None] = {}
        self.turn = 0


class Module:
    """One parsed file. What it binds at the top level and in its classes is always known (by
    name, for the program's indexes); its syntax tree (≈ 23 bytes per byte of source) is held
    only while it is used: :meth:`release` drops it, and the next use parses the bytes again,
    which gives the same tree. Node identities differ between two parses, so a module is
    released only where no evaluation holds its nodes (between evaluators)."""

    __slots__ = (
        "path",
        "name",
        "is_package",
        "data",
        "digest",
        "names",
        "functions",
        "methods",
        "tops",
        "stars",
        "_tree",
        "_held",
        "_used",
    )

    def __init__(self, path: str, name: str, is_package: bool, data: bytes, root: Node, digest: str = "") -> None:
        self.path = path
        self.name = name
        self.is_package = is_package
        self.data = data
        self.digest = digest
        """Of the file's bytes as read (:func:`content_digest`)."""
        self._held: Held | None = None
        self._used = 0
        self._tree: Tree | None = None
        t = self._read(root)
        self.names = frozenset(t.bindings).union(*(info.bindings for info in t.classes.values()))
        """The names bound at the top level and in the classes."""
        self.functions = tuple(
            (n, i) for n, bs in t.bindings.items() for i, b in enumerate(bs) if b.kind in ("def", "value")
        )
        """(name, index in ``bindings[name]``) of each module-level definition or assignment, in order."""
        self.methods = tuple(
            MethodDef(q, n, b.node.start_byte, b.node.end_byte, method_kind(b.node))
            for q, info in t.classes.items()
            for n, bs in info.bindings.items()
            for b in bs
            if b.kind == "def" and b.node is not None
        )
        """Each method, in order: where it is is known without the tree, so a call by name can
        pass over the ones that do not matter without parsing their modules again."""
        self.tops: dict[str, tuple[int | str | None, ...] | None] = {
            n: tuple(_bare(b) for b in bs) if all(b.kind in _BARE for b in bs) else None for n, bs in t.bindings.items()
        }
        """Every top-level name; where all its bindings are definitions, imports or opaque, what
        they are without the tree (:func:`_bare`): a name imported from the module is resolved
        without parsing it again. None where the tree is needed (a value, a class)."""
        self.stars = tuple(t.stars)
        """What ``from x import *`` imports, in order."""

    def summary(self) -> tuple:
        """What the module is without its tree (:meth:`summarised` makes it again): a process
        that parsed it hands this on, and the tree is parsed again where it is used."""
        return (
            self.path,
            self.name,
            self.is_package,
            self.data,
            self.digest,
            self.names,
            self.functions,
            self.methods,
            self.tops,
            self.stars,
        )

    @classmethod
    def summarised(cls, summary: tuple) -> Module:
        """The module :meth:`summary` describes, its tree not yet parsed."""
        mod = cls.__new__(cls)
        (
            mod.path,
            mod.name,
            mod.is_package,
            mod.data,
            mod.digest,
            mod.names,
            mod.functions,
            mod.methods,
            mod.tops,
            mod.stars,
        ) = summary
        mod._held, mod._used, mod._tree = None, 0, None
        return mod

    def encoded(self) -> dict:
        """The :meth:`summary` as JSON, for the result cache, kept by the file's path and content
        (:meth:`decoded` makes the module again from it and the file's bytes): the bytes are in
        it only where :mod:`~auditor.python.recover` changed them."""
        return {
            "names": sorted(self.names),
            "functions": [list(f) for f in self.functions],
            "methods": [[m.qual, m.name, m.start, m.end, m.kind] for m in self.methods],
            "tops": {n: None if t is None else list(t) for n, t in self.tops.items()},
            "stars": list(self.stars),
            "data": None if content_digest(self.data) == self.digest else self.data.decode("utf-8"),
        }

    @classmethod
    def decoded(cls, path: str, data: bytes, digest: str, d: dict) -> Module:
        """The module :meth:`encoded` describes, of the file at ``path`` with these bytes and
        their digest, its tree not yet parsed. Raises KeyError, TypeError or ValueError on
        anything :meth:`encoded` did not write."""
        name, is_package = module_name(path)
        return cls.summarised(
            (
                path,
                name,
                is_package,
                data if d["data"] is None else _of(str, d["data"]).encode("utf-8"),
                digest,
                frozenset(_of(str, n) for n in d["names"]),
                tuple((_of(str, n), _of(int, i)) for n, i in d["functions"]),
                tuple(
                    MethodDef(_of(str, q), _of(str, n), _of(int, a), _of(int, b), _of(str, k))
                    for q, n, a, b, k in d["methods"]
                ),
                {
                    _of(str, n): None if t is None else tuple(None if x is None else _of((int, str), x) for x in t)
                    for n, t in _of(dict, d["tops"]).items()
                },
                tuple(_of(str, x) for x in d["stars"]),
            )
        )

    def _read(self, root: Node) -> Tree:
        t = self._tree = Tree(root)
        _collect(self, t, root.children, t.bindings, "")
        if self._held is not None:
            self._held.modules[self] = None
        return t

    def tree(self) -> Tree:
        """The module's tree and what it gives, parsed again if it was released."""
        t = self._tree
        if t is None:
            t = self._read(parser().parse(self.data).root_node)
        if self._held is not None:
            self._used = self._held.turn
        return t

    def release(self) -> None:
        """Drop the tree; no node of it may be used after this."""
        self._tree = None

    @property
    def parsed(self) -> bool:
        return self._tree is not None

    @property
    def root(self) -> Node:
        return self.tree().root

    @property
    def bindings(self) -> dict[str, list[Binding]]:
        """Top-level names: all of them, joined when evaluated."""
        return self.tree().bindings

    @property
    def classes(self) -> dict[str, ClassInfo]:
        return self.tree().classes

    @property
    def units(self) -> list[tuple[Node, str, tuple[str, ...]]]:
        """Top-level statements and class members: (node, qualname of the scope, names bound)."""
        return self.tree().units

    @property
    def defs(self) -> dict[int, Node]:
        """Function and lambda nodes by start byte, filled as they are looked up."""
        return self.tree().defs

    @property
    def assigned(self) -> dict[int, frozenset[str]]:
        """Names each loop body assigns, by node id, filled as they are looked up."""
        return self.tree().assigned

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")


_PY2_HINT = re.compile(rb"^[ \t]*(?:print|exec)[ \t]+[^\s(=.,)\]:]", re.M)


def first_error(root: Node, data: bytes) -> Node | None:
    """The first ERROR/MISSING node, or Python 2 ``print``/``exec`` statement, in source order."""
    if not root.has_error and not _PY2_HINT.search(data):
        return None
    best = None
    stack = [root]
    while stack:
        n = stack.pop()
        if n.is_error or n.is_missing or n.type in _PY2:
            if best is None or n.start_byte < best.start_byte:
                best = n
            continue
        stack.extend(n.children)
    return best


def parse(file: SourceFile) -> tuple[Module | None, FileError | None]:
    """Parse one file. A bad encoding is an error and no module; a syntax error (or a Python 2
    statement) is an error too, but the statements tree-sitter did parse are kept. Valid
    Python that tree-sitter rejects is no error (:mod:`auditor.python.recover`)."""
    try:
        file.data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = file.data.count(b"\n", 0, e.start) + 1
        return None, FileError(file.path, f"not valid UTF-8 at line {line}", file.input)
    data, tree, err = recover.readable(file.data, parser().parse, first_error)
    error = None
    if err is not None:
        error = FileError(file.path, f"python syntax error at line {err.start_point[0] + 1}", file.input)
    name, is_package = module_name(file.path)
    return Module(file.path, name, is_package, data, tree.root_node, digest=content_digest(file.data)), error


def dotted(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _collect(mod: Module, t: Tree, stmts, bindings: dict, scope: str) -> None:
    """Bindings of a module or class body, looking into compound statements but not into
    function bodies; records units and definition nodes as it goes."""
    for stmt in stmts:
        if stmt.has_error or stmt.type in _PY2:
            continue
        names: list[str] = []
        _bind_stmt(mod, t, stmt, bindings, scope, names)
        if stmt.is_named and stmt.type != "comment":
            t.units.append((stmt, scope, tuple(names)))


def _add(bindings: dict, names: list, name: str, b: Binding) -> None:
    bindings.setdefault(name, []).append(b)
    names.append(name)


def _bind_stmt(mod: Module, tree: Tree, stmt: Node, bindings: dict, scope: str, names: list) -> None:
    t = stmt.type
    if t == "decorated_definition":
        stmt = child(stmt, "definition")
        t = stmt.type
    if t == "function_definition":
        name = dotted(child(stmt, "name"))
        _add(bindings, names, name, Binding("def", stmt))
    elif t == "class_definition":
        name = dotted(child(stmt, "name"))
        qual = f"{scope}.{name}" if scope else name
        _add(bindings, names, name, Binding("class", stmt))
        supers = stmt.child_by_field_name("superclasses")
        bases = (
            tuple(dotted(c) for c in supers.named_children if c.type in ("identifier", "attribute")) if supers else ()
        )
        info = ClassInfo(mod.name, qual, stmt, bases=bases)
        tree.classes[qual] = info
        body = child(stmt, "body")
        _collect(mod, tree, body.named_children, info.bindings, qual)
    elif t == "expression_statement":
        for c in stmt.named_children:
            if c.type in ("assignment", "augmented_assignment"):
                _bind_assignment(c, bindings, names)
    elif t in ("import_statement", "import_from_statement"):
        for name, target in imports(mod, stmt):
            if name == "*":
                tree.stars.append(target)
            else:
                _add(bindings, names, name, Binding("import", stmt, target=target))
    elif t in (
        "if_statement",
        "try_statement",
        "with_statement",
        "for_statement",
        "while_statement",
        "elif_clause",
        "else_clause",
        "except_clause",
        "finally_clause",
        "block",
        "match_statement",
    ):
        if t == "for_statement":
            for n in _target_names(child(stmt, "left")):
                _add(bindings, names, n, Binding("opaque"))
        for c in stmt.named_children:
            if (
                c.type == "block"
                or c.type.endswith("_clause")
                or c.type.endswith("_statement")
                or c.type == "decorated_definition"
            ):
                _bind_stmt(mod, tree, c, bindings, scope, names)


def _bind_assignment(node: Node, bindings: dict, names: list) -> None:
    """``a = b = rhs``, ``a, b = rhs``; augmented and annotated-only forms are opaque."""
    targets = []
    rhs: Node | None = node
    while rhs is not None and rhs.type == "assignment":
        targets.append(child(rhs, "left"))
        rhs = rhs.child_by_field_name("right")
    if node.type == "augmented_assignment":
        for n in _target_names(child(node, "left")):
            _add(bindings, names, n, Binding("opaque"))
        return
    for target in targets:
        for n, path in destructure(target):
            _add(bindings, names, n, Binding("value", rhs, path) if rhs is not None else Binding("opaque"))


def destructure(target: Node | None, path: tuple = ()) -> Iterator[tuple[str, tuple]]:
    """Names in an assignment target with their index path: ``a, (b, c)`` -> a (0,), b (1, 0), ..."""
    if target is None:
        return
    if target.type == "identifier":
        yield dotted(target), path
    elif target.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple", "list"):
        items = [c for c in target.named_children]
        starred = any(c.type in ("list_splat_pattern", "list_splat") for c in items)
        for i, c in enumerate(items):
            if c.type in ("list_splat_pattern", "list_splat"):
                for n, _ in destructure(c.named_children[0] if c.named_children else None, path):
                    yield n, path + (None,)
            elif starred:
                for n, _ in destructure(c, path):
                    yield n, path + (None,)
            else:
                yield from destructure(c, path + (i,))
    elif target.type == "parenthesized_expression" and target.named_children:
        yield from destructure(target.named_children[0], path)


def _target_names(target: Node):
    return [n for n, _ in destructure(target)] if target is not None else []


def definition_at(mod: Module, start: int) -> Node | None:
    """The function or lambda that starts at byte ``start`` (looked up once, then kept)."""
    hit = mod.defs.get(start)
    if hit is None:
        n = mod.root.descendant_for_byte_range(start, start)
        while n is not None and not (n.type in ("function_definition", "lambda") and n.start_byte == start):
            n = n.parent
        if n is not None:
            mod.defs[start] = n
        hit = n
    return hit


@cache
def _targets() -> Query:
    return Query(
        language(), "(assignment left: (_) @t) (augmented_assignment left: (_) @t) (for_statement left: (_) @t)"
    )


_SCOPES = frozenset({"function_definition", "class_definition", "lambda"})


def assigned_in(mod: Module, body: Node) -> frozenset[str]:
    """The names a loop body binds by assignment or ``for``, not counting nested scopes
    (found by a query over its bytes, once per body)."""
    hit = mod.assigned.get(body.id)
    if hit is None:
        cursor = QueryCursor(_targets())
        cursor.set_byte_range(body.start_byte, body.end_byte)
        out: set[str] = set()
        for target in cursor.captures(body).get("t", ()):
            p = target.parent
            while p is not None and p.id != body.id and p.type not in _SCOPES:
                p = p.parent
            if p is not None and p.id == body.id:
                out.update(name for name, _ in destructure(target))
        hit = mod.assigned[body.id] = frozenset(out)
    return hit


def imports(mod: Module, stmt: Node) -> list[tuple[str, str]]:
    """(local name, absolute dotted target) for each name an import statement binds.

    ``import a.b`` binds ``a`` to module ``a``; ``import a.b as c`` binds ``c`` to ``a.b``;
    ``from .x import y`` binds ``y`` to ``<package>.x.y`` (module or attribute, decided later);
    a star import yields ``("*", module)``.
    """
    out = []
    if stmt.type == "import_statement":
        for c in stmt.named_children:
            if c.type == "aliased_import":
                out.append((dotted(child(c, "alias")), dotted(child(c, "name"))))
            elif c.type == "dotted_name":
                full = dotted(c)
                out.append((full.split(".")[0], full.split(".")[0]))
        return out
    src = child(stmt, "module_name")
    base = absolute(mod, src)
    for c in stmt.named_children:
        if c.id == src.id or c.type == "comment":
            continue
        if c.type == "wildcard_import":
            out.append(("*", base))
        elif c.type == "aliased_import":
            out.append((dotted(child(c, "alias")), f"{base}.{dotted(child(c, 'name'))}"))
        elif c.type == "dotted_name":
            out.append((dotted(c).split(".")[-1], f"{base}.{dotted(c)}"))
    return out


def absolute(mod: Module, src: Node) -> str:
    """The absolute dotted name of an import source, relative ones resolved against ``mod``."""
    if src.type != "relative_import":
        return dotted(src)
    prefix = next((c for c in src.children if c.type == "import_prefix"), None)
    level = len(dotted(prefix)) if prefix is not None else 0
    rest = next((dotted(c) for c in src.children if c.type == "dotted_name"), "")
    parts = mod.package.split(".") if mod.package else []
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(p for p in (*parts, rest) if p)


@dataclass(slots=True)
class Reads:
    """What one evaluation read of the program besides the modules it was given: the modules it
    looked at (by path), and what each call by name found (the paths of the definitions, in
    order). With the program's loaded modules the same and those modules unchanged, the
    evaluation's result is the same: this is what a kept result is checked against."""

    modules: set[str] = field(default_factory=set)
    by_name: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """``f:name`` (module-level definitions) or ``m:name`` (methods) -> the definers' paths;
    ``l:name`` (a loaded module) and ``i:name`` (an import) -> the module's path, or none."""

    def note(self, kind: str, name: str, found) -> None:
        paths = tuple(e[0].path for e in found)
        self.by_name[f"{kind}:{name}"] = paths
        self.modules.update(paths)


class Program:
    """The modules of one input, with the indexes resolution needs. Files are parsed when the
    scan asks for them or when resolution reaches them (an ``__init__`` that re-exports)."""

    def __init__(self, files=()) -> None:
        self.modules: dict[str, Module] = {}
        self.by_path: dict[str, Module] = {}
        self.errors: list[FileError] = []
        self._files: dict[str, SourceFile] = {}
        self._paths: dict[str, SourceFile] = {}
        self._suffix: dict[str, list[str]] = {}
        self.functions: dict[str, list[tuple[Module, str, int]]] = {}
        """Module-level definitions by name: (module, name, index in its bindings), in load order."""
        self.methods: dict[str, list[tuple[Module, MethodDef]]] = {}
        """Methods by name, with their modules, in load order."""
        self._held = Held()
        self.reads: Reads | None = None
        """While set, what the evaluation reads of the program is noted in it (:meth:`begin`)."""
        self.log: list[tuple[str, str, str]] | None = None
        """While set, each file loaded (path, content digest) and each module dropped (path, why), in order."""
        self.parses: list[tuple[Module | None, FileError | None]] = []
        """While :attr:`log` is set, what each load it lists parsed: its module and error."""
        self._journal: list[tuple[dict, str, int]] | None = None
        self._added: list[Module] = []
        self._parsed: dict[str, tuple[Module | None, FileError | None]] = {}
        """Files loaded by an evaluation since rewound, as parsed (:meth:`begin`)."""
        self._errors_before = 0
        packages = set()
        for f in files:
            self._paths.setdefault(f.path, f)
            name, is_package = module_name(f.path)
            if name in self._files:
                continue
            self._files[name] = f
            if is_package:
                packages.add(name)
        for name in self._files:
            # a suffix names the module only where the folders above it are no package: in
            # ``python/sglang/srt/utils`` the package starts at ``sglang``, while torch's
            # ``torch/_dynamo/polyfills/functools.py`` is not the standard library's functools
            parts = name.split(".")
            for i in range(1, len(parts)):
                if ".".join(parts[:i]) in packages:
                    break
                self._suffix.setdefault(".".join(parts[i:]), []).append(name)

    def load(self, file: SourceFile, parsed: tuple[Module | None, FileError | None] | None = None) -> Module | None:
        """The file's module, parsed unless loaded before (or ``parsed`` gives it: a module
        summarised elsewhere, and the error of parsing it)."""
        if file.path in self.by_path:
            return self.by_path[file.path]
        parsed = parsed or self._parsed.get(file.path)
        if parsed is None:
            parsed = parse(file)
            if self._journal is not None:  # parsed once, whatever evaluation loads it
                self._parsed[file.path] = parsed
        mod, error = parsed
        if self.log is not None:
            self.log.append(("load", file.path, mod.digest if mod is not None else content_digest(file.data)))
            self.parses.append((mod, error))
        if error is not None:
            self.errors.append(error)
        if mod is not None:
            self.add(mod)
        return mod

    def drop(self, mod: Module, reason: str) -> None:
        """Take a module out (it could not be evaluated), listing why."""
        if self.log is not None:
            self.log.append(("drop", mod.path, reason))
        self.errors.append(FileError(mod.path, reason, self._files[mod.name].input if mod.name in self._files else ""))
        if self.modules.get(mod.name) is mod:
            del self.modules[mod.name]
        self.by_path.pop(mod.path, None)
        for functions in self.functions.values():
            functions[:] = [e for e in functions if e[0] is not mod]
        for methods in self.methods.values():
            methods[:] = [e for e in methods if e[0] is not mod]

    def add(self, mod: Module) -> None:
        journal = self._journal
        if journal is not None:
            self._added.append(mod)
            journal.append((self.modules, mod.name, -1 if mod.name in self.modules else 0))
        self.modules.setdefault(mod.name, mod)
        self.by_path[mod.path] = mod
        mod._held = self._held
        if mod.parsed:
            self._held.modules[mod] = None
        for name, i in mod.functions:
            if journal is not None:
                journal.append((self.functions, name, len(self.functions.get(name, ()))))
            self.functions.setdefault(name, []).append((mod, name, i))
        for method in mod.methods:
            if journal is not None:
                journal.append((self.methods, method.name, len(self.methods.get(method.name, ()))))
            self.methods.setdefault(method.name, []).append((mod, method))

    def trim(self, budget: int) -> None:
        """End a turn: release the trees of the modules used least recently until those held
        hold at most ``budget`` bytes of source. Called only between evaluators, which hold
        nodes; which trees are held never changes what is found."""
        held = self._held
        held.turn += 1
        size = sum(len(m.data) for m in held.modules)
        if size <= budget:
            return
        for m in sorted(held.modules, key=lambda m: m._used):
            if size <= budget:
                break
            m.release()
            del held.modules[m]
            size -= len(m.data)

    def begin(self) -> Reads:
        """Start one evaluation that leaves the program as it found it (:meth:`rewind`): the
        modules it loads on the way are taken out again, so that what it finds depends on the
        program and on what it reads, never on the evaluations before it in this process.
        Returns where its reads are noted."""
        self._journal, self._added, self._errors_before = [], [], len(self.errors)
        self.reads = Reads()
        return self.reads

    def rewind(self) -> list[FileError]:
        """Undo the loads since :meth:`begin`; the errors those loads listed."""
        journal = self._journal or []
        for index, name, before in reversed(journal):
            if index is self.modules:
                if before == 0:
                    del self.modules[name]
            elif before == 0:
                del index[name]
            else:
                del index[name][before:]
        for mod in self._added:
            self.by_path.pop(mod.path, None)
        errors = self.errors[self._errors_before :]
        del self.errors[self._errors_before :]
        self._journal, self._added, self.reads = None, [], None
        return errors

    def loaded(self, name: str) -> Module | None:
        """A module already loaded, by its absolute dotted name (none is loaded for it here)."""
        return self._noted("l", name, self.modules.get(name))

    def definers(self, name: str) -> list[tuple[Module, Binding]]:
        """The first eight module-level definitions of ``name`` in load order (a call by name)."""
        found = self.functions.get(name, ())[:8]
        if self.reads is not None:
            self.reads.note("f", name, found)
        return [(m, m.bindings[name][i]) for m, _, i in found]

    def method_definers(self, name: str) -> list[tuple[Module, MethodDef]]:
        """The first eight methods named ``name`` in load order (a call on an opaque receiver)."""
        found = self.methods.get(name, ())[:8]
        if self.reads is not None:
            self.reads.note("m", name, found)
        return list(found)

    def module(self, name: str) -> Module | None:
        """A module by absolute dotted name, or by suffix when the input root sits above the package."""
        return self._noted("i", name, self._module(name))

    def _noted(self, kind: str, name: str, m: Module | None) -> Module | None:
        """``m``, found for ``name``, noted in the reads of the evaluation in progress (the first finding counts)."""
        if self.reads is not None:
            self.reads.by_name.setdefault(f"{kind}:{name}", (m.path,) if m is not None else ())
            if m is not None:
                self.reads.modules.add(m.path)
        return m

    def file_digest(self, path: str) -> str:
        """The content digest of one of the program's files, loaded or not ("" for none)."""
        m = self.by_path.get(path)
        if m is not None:
            return m.digest
        f = self._paths.get(path)
        return content_digest(f.data) if f is not None else ""

    def source(self, path: str) -> SourceFile | None:
        """One of the program's files, by path."""
        return self._paths.get(path)

    def paths(self) -> list[str]:
        """Every Python file of the program, loaded or not, in order."""
        return list(self._paths)

    def still_reads(self, reads: Reads) -> bool:
        """Whether an evaluation begun now (:meth:`begin`) would find what ``reads`` found, for
        the lookups it made: the same loaded modules, the same definers of each name called, the
        same modules for its imports. (The modules' contents are checked by their digests.)"""
        for key, was in reads.by_name.items():
            kind, _, name = key.partition(":")
            if kind == "f" or kind == "m":
                now = tuple(e[0].path for e in (self.functions if kind == "f" else self.methods).get(name, ())[:8])
                # the evaluation's own loads come after these
                if was[: len(now)] != now:
                    return False
            elif kind == "l":
                m = self.modules.get(name)
                if m is not None:
                    if was != (m.path,):
                        return False
                elif was and was[0] in self.by_path:
                    return False
            elif kind == "i":
                if was != self._would_load(name):
                    return False
            else:
                return False
        return True

    def _would_load(self, name: str) -> tuple[str, ...]:
        """The path :meth:`module` finds for ``name``, without loading it."""
        m = self.modules.get(name)
        if m is not None:
            return (m.path,)
        if name not in self._files:
            cands = self._suffix.get(name)
            if not cands:
                return ()
            name = min(cands, key=len)
            m = self.modules.get(name)
            if m is not None:
                return (m.path,)
        f = self._files.get(name)
        return (f.path,) if f is not None else ()

    def _module(self, name: str) -> Module | None:
        m = self.modules.get(name)
        if m is not None:
            return m
        if name not in self._files:
            cands = self._suffix.get(name)
            if not cands:
                return None
            name = min(cands, key=len)
            m = self.modules.get(name)
            if m is not None:
                return m
        f = self._files.get(name)
        return self.load(f) if f is not None else None


class Words(Protocol):
    """A pattern of :func:`word_pattern` (Python's or RE2's): what the searches use of it."""

    def finditer(self, data: bytes) -> Iterator[Any]: ...


_BYTES = re2.Options()
_BYTES.encoding = re2.Options.Encoding.LATIN1  # byte for byte, as Python's bytes patterns
_BYTES.max_mem = 64 << 20  # a trie of thousands of names keeps its DFA


def word_pattern(names) -> Words | None:
    """A bytes pattern for any of ``names`` (a trie, so that hundreds of names cost about what
    one does); see :func:`word_starts` for whole-identifier matches. In RE2 (2.5× faster on a
    package's files, the same matches) where each name ends in an ASCII word character, so that
    ``\\b`` after it is the lookahead Python's pattern has, which RE2 lacks."""
    trie: dict = {}
    ascii_ends = True
    for name in set(names):
        node = trie
        for ch in name.encode():
            node = node.setdefault(ch, {})
        node[None] = {}
        ascii_ends = ascii_ends and name[-1:].isascii() and (name[-1:].isalnum() or name[-1:] == "_")
    if not trie:
        return None
    if ascii_ends:
        try:
            return re2.compile(_trie_regex(trie) + rb"\b", _BYTES)
        except re2.error:
            pass  # past RE2's memory: Python's engine has no such bound
    return re.compile(_trie_regex(trie) + rb"(?![A-Za-z0-9_])")


def word_starts(pattern: Words, data: bytes) -> list[int]:
    """Where ``pattern`` (from :func:`word_pattern`) matches a whole identifier. The check
    before the match is done here: a look-behind in the pattern costs it its fast scan."""
    return [m.start() for m in pattern.finditer(data) if _word_start(data, m.start())]


def word_in(pattern: Words, data: bytes) -> bool:
    """Whether :func:`word_starts` finds anything (it stops at the first)."""
    return any(_word_start(data, m.start()) for m in pattern.finditer(data))


def _word_start(data: bytes, i: int) -> bool:
    return i == 0 or not (data[i - 1 : i].isalnum() or data[i - 1] == 95)


def _trie_regex(node: dict) -> bytes:
    alts = []
    end = None in node
    for ch, sub in sorted((k, v) for k, v in node.items() if k is not None):
        alts.append(re.escape(bytes([ch])) + _trie_regex(sub))
    if not alts:
        return b""
    body = alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
    if end:
        body = b"(?:" + body + b")?"
    return body
