"""Gates in vendored functions nothing that can see them calls are listed, not judged (:mod:`auditor.pipeline.calls`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.facts.code import blank
from auditor.model import Reach
from auditor.pipeline import Options, audit
from auditor.pipeline.calls import functions_of

GATED = """#pragma once
namespace lib {
namespace detail {
inline __device__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200)
  cudaGridDependencySynchronize();
#endif
}
}  // namespace detail
}  // namespace lib
"""
HELPER = "pkg/third_party/lib/helpers.cuh"
OWN = "pkg/include/own.cuh"


def _tree(root: Path, kernel: str, elsewhere: str = "") -> Path:
    files = {
        HELPER: GATED,
        OWN: GATED,
        "pkg/csrc/kernel.cu": (
            '#include "../third_party/lib/helpers.cuh"\n#include "../include/own.cuh"\n'
            f"// wait_for_previous() in a comment calls nothing\n__global__ void kernel() {{ {kernel} }}\n"
        ),
        "pkg/csrc/other.cu": f"__global__ void other_kernel() {{ {elsewhere} }}\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _reach(root: Path) -> dict[str, Reach]:
    result = audit([str(root)], Options(jobs=1))
    reach = {g.file: g.reach for g in result.gates}
    judged = {f.file for f in result.findings} | {file for f in result.findings for file, _ in f.also}
    assert judged == {f for f, r in reach.items() if r == Reach.REACHED}
    return reach


@pytest.mark.parametrize(
    ("kernel", "elsewhere", "called"),
    [
        ("", "", False),  # nothing calls it
        ("wait_for_previous();", "", True),  # unqualified, from a file that includes the header
        ("detail::wait_for_previous();", "", True),  # through its own namespace
        ("lib::detail::wait_for_previous();", "", True),
        ("auto f = &detail::wait_for_previous;", "", True),  # a function pointer
        ("other::wait_for_previous();", "", False),  # another namespace's function of that name
        ("q.wait_for_previous(); p->wait_for_previous();", "", False),  # methods of something else
        ('puts("wait_for_previous()");', "", False),  # a string
        ("", "wait_for_previous();", False),  # only from a file that does not include the header
    ],
)
def test_a_vendored_helper_is_judged_when_something_that_sees_it_calls_it(tmp_path, kernel, elsewhere, called):
    reach = _reach(_tree(tmp_path, kernel, elsewhere))
    assert reach[HELPER] == (Reach.REACHED if called else Reach.UNCALLED)
    assert reach[OWN] == Reach.REACHED  # the package's own headers are its interface


def test_a_call_in_a_macro_body_counts(tmp_path):
    root = _tree(tmp_path, "WAIT();")
    kernel = root / "pkg/csrc/kernel.cu"
    kernel.write_text("#define WAIT() lib::detail::wait_for_previous()\n" + kernel.read_text())
    assert _reach(root)[HELPER] == Reach.REACHED


def test_a_namespace_alias_counts_as_the_namespace(tmp_path):
    root = _tree(tmp_path, "ld::wait_for_previous();")
    kernel = root / "pkg/csrc/kernel.cu"
    kernel.write_text("namespace ld = lib::detail;\n" + kernel.read_text())
    assert _reach(root)[HELPER] == Reach.REACHED


def test_a_jit_source_written_in_python_calls_what_it_includes(tmp_path):
    root = _tree(tmp_path, "")
    (root / "pkg/build.py").write_text(
        'SOURCE = """\n#include <lib/helpers.cuh>\n__global__ void k() { lib::detail::wait_for_previous(); }\n"""\n'
    )
    assert _reach(root)[HELPER] == Reach.REACHED


def test_gates_outside_free_functions_are_untouched(tmp_path):
    """File scope, a method, a kernel (launched by name) and a macro-made body stay judged."""
    gate = "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200)\n  x();\n#endif\n"
    header = (
        "#pragma once\n"
        f"{gate}"
        f"struct S {{\n  __device__ void method() {{\n{gate}  }}\n}};\n"
        f"__global__ void unlaunched() {{\n{gate}}}\n"
        f"TEST_CASE(a, b) {{\n{gate}}}\n"
    )
    root = _tree(tmp_path, "")
    (root / "pkg/third_party/lib/more.cuh").write_text(header)
    kernel = root / "pkg/csrc/kernel.cu"
    kernel.write_text('#include "../third_party/lib/more.cuh"\n' + kernel.read_text())
    reach = audit([str(root)], Options(jobs=1)).gates
    assert {g.reach for g in reach if g.file.endswith("more.cuh")} == {Reach.REACHED}


def test_functions_of_finds_free_functions_with_their_namespaces():
    code = (
        "namespace a { namespace b::c {\n"
        "template <int N> __device__ __forceinline__ int f(int x) noexcept { return x; }\n"
        "}}\n"
        "struct S { int g() const { return 0; } };\n"
        "int S::h() { return 1; }\n"
        "namespace { static int k() { return 2; } }\n"
        "auto l = [](int y) { return y; };\n"
        'extern "C" { void m() {} }\n'
        "template <typename T, typename E = void> class X<T, enable_if_t<(T::k >= 80)>> { void n() {} };\n"
    )
    found = {f.name: (f.first, f.last, sorted(f.namespaces), f.local) for f in functions_of(blank(code, "cuda")[0])}
    assert found == {"f": (2, 2, ["a", "b", "c"], False), "k": (6, 6, [], True), "m": (8, 8, [], False)}


def test_the_reports_say_uncalled(tmp_path, capsys):
    import json

    from auditor import cli

    root = _tree(tmp_path, "")
    cli.main(["scan", str(root), "--no-cache", "--jobs", "1", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert {g["file"]: g["reach"] for g in doc["gates"] if "reach" in g} == {HELPER: "uncalled"}
    assert doc["summary"]["unreached_gates"] == 1
    cli.main(["scan", str(root), "--no-cache", "--jobs", "1"])
    text = capsys.readouterr().out
    assert "not judged: a function of vendored code that no file able to see its definition calls" in text
