"""A branch that turns a target away from an instruction its fallback compiles to anyway.

``#if … defined(__CUDA_ARCH_FEAT_SM120_ALL)`` writes ``cvt.rp.satfinite.ue8m0x2.f32`` by hand and
leaves 12.1 out; the ``#else`` calls ``__nv_cvt_float_to_e8m0(…, cudaRoundPosInf)``, which nvcc
lowers to that instruction on sm_121a and sm_121f (``data/intrinsic-lowering.json``): 12.1
loses nothing, and the minor-version trap would point the wrong way.
"""

from __future__ import annotations

from tests.conftest import audit_texts

CONVERT = """\
#include <cuda_fp8.h>

__device__ __inline__ uint8_t float_to_e8m0(float val) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000) && \\
    (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM120_ALL))
  uint16_t out;
  asm volatile("{\\n" "cvt.rp.satfinite.ue8m0x2.f32   %0, 0.0, %1;\\n" "}" : "=h"(out) : "f"(val));
  return *reinterpret_cast<uint8_t*>(&out);
#else
  return __nv_cvt_float_to_e8m0(val, __NV_SATFINITE, cudaRoundPosInf);
#endif
}
"""


def run(text: str):
    return audit_texts({"pkg/include/convert.cuh": text})


def test_a_fallback_that_compiles_to_the_same_instruction_loses_the_target_nothing():
    gates, findings = run(CONVERT)
    (fallback,) = [g for g in gates if g.line == 9]
    assert "sm_121a cvt.rp.satfinite.ue8m0x2.f32" in fallback.emits
    assert findings == []


def test_a_software_fallback_leaves_the_minor_version_trap():
    software = CONVERT.replace(
        "return __nv_cvt_float_to_e8m0(val, __NV_SATFINITE, cudaRoundPosInf);",
        "return (uint8_t)((__float_as_uint(val) >> 23) & 0xFF);",
    )
    _, findings = run(software)
    assert [f.rule for f in findings] == ["ARCH003"]


def test_round_toward_zero_is_another_instruction():
    """The table is per call: the round-toward-zero conversion emits ``cvt.rz…``, not ``cvt.rp…``."""
    _, findings = run(CONVERT.replace("cudaRoundPosInf", "cudaRoundZero"))
    assert [f.rule for f in findings] == ["ARCH003"]
