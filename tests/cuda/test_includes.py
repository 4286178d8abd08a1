"""Derived macros scoped by the include graph: a definition decides only the files that can see it."""

from __future__ import annotations

import pytest

from auditor import arch
from auditor.cuda.includes import contexts, resolve
from auditor.model import Guards
from auditor.pipeline import Options, audit, audit_input
from tests.conftest import FIXTURES, wheel

SCOPED = FIXTURES / "cuda" / "scoped"


def by_place(result):
    return {(g.file, g.line): g for g in result.gates}


def test_a_definition_in_an_unrelated_unit_does_not_decide():
    g = by_place(audit([str(SCOPED)], Options(jobs=1)))
    pdl = g[("xqa/mha.cu", 6)]  # gen/kernel_0.cu's `#define ENABLE_PDL 0` is in another unit
    assert arch.compact("target", pdl.admits) == "sm_90…sm_121f" and pdl.unknowns == ()
    assert [(r.name, r.file) for r in pdl.resolutions] == [("ENABLE_PDL", "xqa/defines.h")]


def test_a_header_sees_what_its_includer_included_before_it():
    g = by_place(audit([str(SCOPED)], Options(jobs=1)))
    assert g[("common/use.cuh", 4)].admits == ("sm_100", "sm_100a", "sm_100f")
    assert not [x for x in g if x[0] == "other/lone.cuh"]  # no unit holds both: the flag means nothing there


def test_a_vendored_copy_includes_its_own_tree():
    g = by_place(audit([str(SCOPED)], Options(jobs=1)))
    gemm = g[("vendor/a/cutlass/gemm.h", 5)]
    assert gemm.admits == ("sm_90", "sm_90a")  # copy b (>= 900) is another tree's
    assert [r.file for r in gemm.resolutions] == ["vendor/a/cutlass/arch/config.h"]


def test_resolution_and_contexts():
    paths = ["a/x.cu", "a/y.h", "b/y.h", "a/z.h", "c/w.cu"]
    edges = resolve(paths, [["y.h", "z.h", "cuda.h"], ["z.h"], [], ["y.h"], ["a/y.h", "../b/y.h"]])
    # a cycle y <-> z; w names a/y.h by suffix and b/y.h beside itself; cuda.h is not in the input
    assert edges == [[1, 3], [3], [], [1], [1, 2]]
    ctx = contexts(edges, [1, 2, 4, 8, 16])
    # roots x and w make two units; y and z are in both, b/y.h only in w's
    assert ctx == [1 | 2 | 8, 1 | 2 | 4 | 8 | 16, 2 | 4 | 8 | 16, 1 | 2 | 4 | 8 | 16, 2 | 4 | 8 | 16]
    assert resolve(["v/a/cutlass/c.h", "v/b/cutlass/c.h", "v/a/cutlass/g/m.h"], [[], [], ["cutlass/c.h"]])[2] == [0]


@pytest.mark.slow
def test_flashinfer_053_vendored_cutlass_copy_is_not_dead():
    """DeepGEMM's NVRTC header carries its own CUTLASS config block; another copy's definition of
    the same flag made its ``#if !defined(FLAG) && ...`` look dead (a false ARCH006)."""
    from auditor.sources import ZipProvider, read_all

    files, _ = read_all(ZipProvider(str(wheel("flashinfer-python==0.5.3"))))
    gates, findings, _ = audit_input(files, "flashinfer-python==0.5.3", Options(jobs=1))
    header = "flashinfer/data/csrc/nv_internal/tensorrt_llm/deep_gemm/nvrtc_cutlass.cuh"
    (gate,) = [g for g in gates if g.file == header and g.line == 45]
    assert gate.admits == ("sm_90a",) and gate.guards == Guards.DEFINE
    assert not [f for f in findings if f.file == header and f.line == 45]
    # the definition blocks of the vendored CUTLASS report nothing themselves
    config = [f for f in findings if f.file.endswith(("cutlass/arch/config.h", "cute/arch/config.hpp"))]
    assert not [f for f in config if f.rule in ("ARCH001", "ARCH002", "ARCH003", "ARCH007")]
