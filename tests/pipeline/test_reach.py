"""Vendored code the package never builds or imports is listed, not judged (``fixtures/reach``)."""

from __future__ import annotations

import json
import shutil

from auditor import cli
from auditor.model import Reach
from auditor.pipeline import Options, audit
from auditor.pipeline.reach import _imports, headers, in_tests, modules
from tests.conftest import FIXTURES

TREE = FIXTURES / "reach"
LIB = "pkg/third_party/lib"


def _scan(**kw):
    return audit([str(TREE)], Options(jobs=1, **kw))


def test_only_what_a_unit_a_jit_source_or_an_import_reaches_is_judged():
    result = _scan()
    reach = {g.file: g.reach for g in result.gates}
    assert reach == {
        f"{LIB}/used.cuh": Reach.REACHED,  # csrc/kernel.cu includes it
        f"{LIB}/jit_only.cuh": Reach.REACHED,  # build.py writes `#include <lib/jit_only.cuh>`
        f"{LIB}/gemm_wide.cuh": Reach.REACHED,  # ... and `#include <lib/gemm_{VARIANT}.cuh>`
        f"{LIB}/nvrtc_only.cuh": Reach.REACHED,  # the program kernel.cu compiles at run time includes it
        f"{LIB}/unused.cuh": Reach.UNINCLUDED,
        "pkg/csrc/runner/runner.cpp": Reach.PROGRAM,  # its own main(): a test driver
        "pkg/csrc/runner/runner_options.h": Reach.PROGRAM,  # only the driver includes it
        "pkg/third_party/tool/api.py": Reach.REACHED,  # pkg/use.py imports it
        "pkg/third_party/tool/helper.py": Reach.REACHED,  # api.py imports it: `from . import helper`
        "pkg/third_party/dsl/ops.py": Reach.UNIMPORTED,
    }
    assert _sites(result) == {f for f, r in reach.items() if r == Reach.REACHED}
    assert _sites(_scan(unreached=True)) == set(reach)


def _sites(result) -> set[str]:
    """Every file a finding names, its own and those folded into it (one condition in one folder)."""
    return {f.file for f in result.findings} | {file for f in result.findings for file, _ in f.also}


def test_the_reports_say_what_was_not_judged(capsys):
    cli.main(["scan", str(TREE), "--no-cache", "--jobs", "1", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["unreached_gates"] == 4  # unused.cuh, dsl/ops.py and the runner's two files
    assert {g["file"]: g["reach"] for g in doc["gates"] if "reach" in g} == {
        f"{LIB}/unused.cuh": "unincluded",
        "pkg/csrc/runner/runner.cpp": "program",
        "pkg/csrc/runner/runner_options.h": "program",
        "pkg/third_party/dsl/ops.py": "unimported",
    }
    cli.main(["scan", str(TREE), "--no-cache", "--jobs", "1"])
    text = capsys.readouterr().out
    assert "not judged: a vendored header that no translation unit or JIT source of the input includes" in text
    assert text.rstrip().endswith(
        "4 gates in tests and standalone programs, in code built only for other generations and in vendored code"
        " the package never includes, imports or calls, not judged (--unreached judges them)"
    )


def test_headers_alone_say_nothing_about_their_use(tmp_path):
    """A tree of headers with no unit and no JIT source (a header-only library): all reached."""
    shutil.copytree(TREE / LIB, tmp_path / "third_party" / "lib")
    result = audit([str(tmp_path)], Options(jobs=1))
    assert result.gates and not any(g.reach for g in result.gates)
    assert _sites(result) == {g.file for g in result.gates}


def test_own_headers_are_always_reached():
    """Only vendored files can be unreached: the package's own headers are its interface."""
    paths = ["pkg/csrc/a.cu", "pkg/include/api.cuh", "pkg/third_party/x.cuh"]
    assert headers(paths, [(), (), ()], []).reach == {"pkg/third_party/x.cuh": Reach.UNINCLUDED}


def test_vendored_modules_reached_only_from_own_code():
    """Imports inside an unreached vendored tree reach nothing; own code's imports do, transitively."""
    files = {
        "pkg/a.py": b"from pkg.cutlass import base\n",
        "pkg/cutlass/base.py": b"from . import ops\n",
        "pkg/cutlass/ops.py": b"",
        "pkg/cutlass/dsl/__init__.py": b"from ..ops import x\nfrom pkg.cutlass import extra\n",
        "pkg/cutlass/extra.py": b"",
    }
    found = modules(files, files.__getitem__)
    assert found == {"pkg/cutlass/dsl/__init__.py": Reach.UNIMPORTED, "pkg/cutlass/extra.py": Reach.UNIMPORTED}


def test_import_forms():
    text = "from pkg.tp.lib import (\n    a,  # first\n    b as c,\n)\nimport x.y as z, w\nfrom .. import up\nfrom .near import n\n"
    assert _imports("pkg/sub/m.py", text) == {
        "pkg",
        "pkg/tp",
        "pkg/tp/lib",
        "pkg/tp/lib/a",
        "pkg/tp/lib/b",
        "x",
        "x/y",
        "w",
        "pkg/up",
        "pkg/sub",
        "pkg/sub/near",
        "pkg/sub/near/n",
    }


def test_a_vendored_tree_with_an_extension_of_its_own_is_reached():
    """DeepGEMM's extension compiles the headers of its tree at run time."""
    paths = ["pkg/csrc/a.cu", "pkg/third_party/deep_gemm/include/impl.cuh", "pkg/third_party/other/x.cuh"]
    found = headers(paths, [(), (), ()], [], binaries=["pkg/third_party/deep_gemm/_C.abi3.so"]).reach
    assert found == {"pkg/third_party/other/x.cuh": Reach.UNINCLUDED}


def test_a_module_that_puts_its_folder_on_sys_path_reaches_the_folder():
    files = {
        "pkg/a.py": b"from pkg.third_party.fmha import sparse\n",
        "pkg/third_party/fmha/sparse.py": b"import sys, os\nsys.path.insert(0, os.path.dirname(__file__) + '/cute')\n",
        "pkg/third_party/fmha/cute/combine.py": b"",
        "pkg/third_party/dsl/ops.py": b"",
    }
    assert modules(files, files.__getitem__) == {"pkg/third_party/dsl/ops.py": Reach.UNIMPORTED}


def test_tests_are_not_judged():
    """A test that skips on 12.x decides nothing for the package."""
    paths = [
        "pkg/test/unit/test_sparse.py",
        "pkg/tests/helpers.py",
        "pkg/ops_test.py",
        "pkg/conftest.py",
        "pkg/testing.py",
    ]
    assert set(in_tests(paths)) == set(paths[:4])
