"""The program: modules, their bindings, imports and where names resolve."""

from __future__ import annotations

from auditor.model import SourceFile
from auditor.python.symbols import assigned_in, destructure, imports, module_name, parse
from tests.python.program import program


def test_module_names():
    assert module_name("flashinfer/utils.py") == ("flashinfer.utils", False)
    assert module_name("flashinfer/__init__.py") == ("flashinfer", True)


def test_bindings_of_every_branch_are_kept():
    prog = program(
        **{
            "m.py": """
            try:
                import torch
                HAS = True
            except ImportError:
                HAS = False
            def f(): pass
            class C:
                x = 1
            for i in range(3): pass
            """
        }
    )
    mod = prog.by_path["m.py"]
    assert [b.kind for b in mod.bindings["HAS"]] == ["value", "value"]
    assert [b.kind for b in mod.bindings["torch"]] == ["import"]
    assert [b.kind for b in mod.bindings["f"]] == ["def"]
    assert [b.kind for b in mod.bindings["i"]] == ["opaque"]
    assert list(mod.classes) == ["C"] and "x" in mod.classes["C"].bindings


def test_imports_are_made_absolute():
    prog = program(
        **{"pkg/sub/m.py": "from ..utils import is_sm90 as ok\nfrom . import x\nimport a.b\nimport c.d as e\n"}
    )
    mod = prog.by_path["pkg/sub/m.py"]
    stmts = [n for n in mod.root.children if n.type.startswith("import")]
    got = [pair for s in stmts for pair in imports(mod, s)]
    assert got == [("ok", "pkg.utils.is_sm90"), ("x", "pkg.sub.x"), ("a", "a"), ("e", "c.d")]


def test_star_imports_are_listed():
    prog = program(**{"pkg/__init__.py": "from .core import *\n", "pkg/core.py": "X = 1\n"})
    assert prog.by_path["pkg/__init__.py"].stars == ("pkg.core",)


def test_a_module_is_found_by_suffix_when_the_tree_sits_above_the_package():
    prog = program(**{"python/sglang/srt/utils.py": "X = 1\n"})
    mod = prog.module("sglang.srt.utils")
    assert mod is not None and mod.path == "python/sglang/srt/utils.py"
    assert prog.module("sglang.missing") is None


def test_destructuring_paths():
    mod, _ = parse(SourceFile("m.py", b"a, (b, c) = v\nx, (y, *z) = v\n", "python"))
    assert mod is not None
    plain, starred = (s.children[0].child_by_field_name("left") for s in mod.root.children)
    assert list(destructure(plain)) == [("a", (0,)), ("b", (1, 0)), ("c", (1, 1))]
    # beside a starred name no position is known
    assert list(destructure(starred)) == [("x", (0,)), ("y", (1, None)), ("z", (1, None))]


def test_assigned_in_ignores_nested_scopes():
    mod, _ = parse(
        SourceFile("m.py", b"for i in x:\n    a = 1\n    for j in y: b += 1\n    def f(): c = 2\n", "python")
    )
    assert mod is not None
    body = mod.root.children[0].child_by_field_name("body")
    assert assigned_in(mod, body) == {"a", "j", "b"}


def test_instance_attributes_are_found_in_methods():
    prog = program(
        **{
            "m.py": """
            class C:
                def __init__(self):
                    self.a, self.b = f(), 2
                    self.c = g()
                    def inner(other):
                        other.d = 1
            """
        }
    )
    attrs = prog.by_path["m.py"].classes["C"].instance_attrs()
    assert sorted(attrs) == ["a", "b", "c"]
    assert [path for _, path, _ in attrs["b"]] == [(1,)]


def test_a_syntax_error_is_reported_and_the_rest_kept():
    mod, error = parse(SourceFile("m.py", b"X = 1\ndef (:\n", "python"))
    assert mod is not None and "X" in mod.bindings
    assert error is not None and "line 2" in error.reason


def test_bad_encoding_gives_no_module():
    mod, error = parse(SourceFile("m.py", b"X = '\xff'\n", "python"))
    assert mod is None and error is not None and "UTF-8" in error.reason


def test_a_module_inside_another_package_is_not_found_by_its_suffix():
    """torch's ``torch/_dynamo/polyfills/functools.py`` is not the standard library's
    ``functools``; a package under a plain folder (``python/pkg``) is still found by suffix."""
    prog = program(
        **{
            "torch/__init__.py": "",
            "torch/_dynamo/__init__.py": "",
            "torch/_dynamo/polyfills/__init__.py": "",
            "torch/_dynamo/polyfills/functools.py": "def lru_cache(f):\n    return None\n",
            "python/pkg/__init__.py": "",
            "python/pkg/utils.py": "from functools import lru_cache\n",
        }
    )
    assert prog.module("functools") is None
    found = prog.module("pkg.utils")
    assert found is not None and found.path == "python/pkg/utils.py"


def test_a_released_module_parses_again_to_the_same_places():
    """A module's tree is dropped between evaluators and parsed again when used: the same
    bindings, units and classes, at the same bytes, and the program's indexes still find them."""
    prog = program(
        **{
            "m.py": """
            import torch
            HAS = torch.cuda.get_device_capability()[0] >= 9
            def f():
                return HAS
            class C:
                def g(self):
                    return 1
            """
        }
    )
    mod = prog.by_path["m.py"]

    def places():
        units = [(n.start_byte, n.end_byte, scope, names) for n, scope, names in mod.units]
        binds = {k: [(b.kind, b.node.start_byte if b.node else None) for b in bs] for k, bs in mod.bindings.items()}
        return units, binds, sorted(mod.classes)

    before = places()
    prog.trim(0)
    assert not mod.parsed
    assert places() == before and mod.parsed
    prog.trim(0)
    ((found, binding),) = prog.definers("f")
    assert found is mod and binding.node.start_byte == before[1]["f"][0][1]
    prog.trim(0)
    ((found, method),) = prog.method_definers("g")
    assert not mod.parsed  # where a method is, and what kind, is known without the tree
    assert found is mod and (method.qual, method.kind) == ("C", "self")
    assert mod.data[method.start : method.end].startswith(b"def g")


def test_word_starts_finds_whole_identifiers_whichever_engine_searches():
    """RE2 serves names that end in an ASCII word character, Python's ``re`` the others; both
    give the whole-identifier starts a reader would count, a shorter name inside a longer one
    and a name inside a longer identifier left out."""
    import re

    from auditor.python.symbols import word_in, word_pattern, word_starts

    data = "ab abc abc_ xab ab\u00e9 é_ab\nabcd(ab) .ab\tabc2 abc".encode()
    ascii_names = word_pattern(["ab", "abc"])
    assert not isinstance(ascii_names, re.Pattern)  # RE2
    expected = [m.start() for m in re.finditer(rb"(?<![A-Za-z0-9_])(?:abc|ab)(?![A-Za-z0-9_])", data)]
    assert word_starts(ascii_names, data) == expected and len(expected) == 6
    accented = word_pattern(["ab", "abé"])
    assert isinstance(accented, re.Pattern)  # a name that ends outside ASCII: Python's engine
    assert word_starts(accented, data) == [
        m.start() for m in re.finditer(rb"(?<![A-Za-z0-9_])(?:ab\xc3\xa9|ab)(?![A-Za-z0-9_])", data)
    ]
    assert word_in(ascii_names, data) and not word_in(ascii_names, b"xab abc_ abcd")


def test_a_module_imported_from_is_not_parsed_again_for_its_definitions_and_imports():
    """What a module binds by ``def`` and ``import`` resolves from its index after its tree is
    released; a value needs the tree, and is the same when parsed again."""
    from auditor.python.values import Func
    from tests.python.program import interp

    prog = program(
        **{
            "pkg/base.py": "import torch\nfrom torch.cuda import get_device_capability as cap\n\n\ndef f():\n    return 1\n\nX = 2\n",
            "pkg/user.py": "from pkg.base import f, cap, torch\n",
        }
    )
    base = prog.by_path["pkg/base.py"]
    it = interp(prog)
    before = {n: it.attr_of_module(base, n) for n in ("f", "cap", "torch")}
    prog.trim(0)
    it = interp(prog)
    after = {n: it.attr_of_module(base, n) for n in ("f", "cap", "torch")}
    assert not base.parsed and after == before
    assert after["f"].only() == Func("pkg.base", base.data.index(b"def f"), "f")
    assert it.attr_of_module(base, "X") is not None and base.parsed  # a value: the tree again


def test_a_module_kept_as_json_is_the_module_parsed():
    """Issue #20: the result cache keeps each loaded module summarised as JSON (never pickle);
    read back with the file's bytes it is the module a parse gives, the bytes a repair
    stood in for included (tree-sitter cannot read ``return a, *(b)``)."""
    import json

    from auditor.fingerprint import content_digest
    from auditor.python.symbols import Module

    data = b"from .x import y\nfrom z import *\n\nclass C:\n    def m(self):\n        return 1\n\ndef f(a, b):\n    return a, *(b)\n\nN = f(1, 2)\n"
    mod, error = parse(SourceFile("pkg/m.py", data, "python", "t"))
    assert mod is not None and error is None and mod.data != data  # repaired
    back = Module.decoded("pkg/m.py", data, content_digest(data), json.loads(json.dumps(mod.encoded())))
    assert back.summary() == mod.summary()
    assert back.methods and back.stars and back.tops["y"] == ("pkg.x.y",)
