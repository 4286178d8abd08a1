"""A C/CUDA gate inside a function the turned-away target cannot run decides nothing there.

``#if ARRIVE_FIRST`` around one ``mbarrier.arrive`` in a kernel whose loads are
``.cta_group::2`` TMA copies: the guarded line assembles for sm_120, the kernel does not, so
the gate is no conservative gate to widen (ARCH007). What the target compiles of the function
counts: code under another gate that turns it away (a Blackwell-only branch beside a path of
its own) does not.
"""

from __future__ import annotations

from tests.conftest import audit_texts

KERNEL = """\
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1000)
#define ARRIVE_FIRST 1
#else
#define ARRIVE_FIRST 0
#endif

__global__ void gemm(unsigned bar, unsigned smem, const void* desc, int k) {
#if ARRIVE_FIRST
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cluster.b64 _, [%0], %1;" :: "r"(bar), "r"(32768u));
#endif
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.cta_group::2 [%0], [%1, {%2, %2}], [%3];" :: "r"(smem), "l"(desc), "r"(k), "r"(bar));
}
"""


def run(text: str):
    return audit_texts({"pkg/csrc/gemm.cu": text})


def test_a_gate_in_a_kernel_the_target_cannot_run_is_not_a_conservative_gate():
    gates, findings = run(KERNEL)
    assert "ARCH007" not in {f.rule for f in findings}
    (gate,) = [g for g in gates if g.line == 8]
    (around,) = [f for f in gate.features if f.notes.startswith("around the gate")]
    assert "cta_group::2" in around.token and around.line == 11 and "`gemm`" in around.notes


def test_the_same_gate_in_a_kernel_the_target_can_run_stays_conservative():
    plain = KERNEL.replace(".cta_group::2 [%0]", " [%0]")
    _, findings = run(plain)
    assert [(f.rule, f.line) for f in findings if f.rule == "ARCH007"] == [("ARCH007", 8)]


def test_code_under_another_gate_that_turns_the_target_away_does_not_count():
    """The ``cta_group::2`` copy sits in a Blackwell-only branch; 12.x compiles the other one."""
    split = KERNEL.replace(
        '  asm volatile("cp.async.bulk.tensor',
        '#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 1000)\n  asm volatile("cp.async.bulk.tensor',
    ).replace('"r"(bar));\n}', '"r"(bar));\n#endif\n}')
    gates, findings = run(split)
    (gate,) = [g for g in gates if g.line == 8]
    assert not any(f.notes.startswith("around the gate") for f in gate.features)
    assert "ARCH007" in {f.rule for f in findings}


def test_a_kernel_named_by_a_macro_is_the_function_around_its_gates():
    """Generated kernels take their name from a macro (``CAKE_PROGRAM_KERNEL``): still a function."""
    named = KERNEL.replace(
        "__global__ void gemm(", '#define PROGRAM_KERNEL gemm_0\nextern "C" {\n__global__ void PROGRAM_KERNEL('
    ).replace('"r"(bar));\n}\n', '"r"(bar));\n}\n}\n')
    gates, findings = run(named)
    assert "ARCH007" not in {f.rule for f in findings}
    assert any(f.notes == "around the gate, in `PROGRAM_KERNEL`" for g in gates for f in g.features)


def test_a_kernel_whose_signature_is_chosen_by_an_if_group_is_the_function_around_its_gates():
    """Each arm of an ``#if`` group writes the parameter list; the ``#endif`` with its long
    comment stands between the last one and the body."""
    arms = KERNEL.replace(
        "__global__ void gemm(unsigned bar, unsigned smem, const void* desc, int k) {",
        "__global__ void\n#if WIDE\ngemm(unsigned bar, unsigned smem, const void* desc, long k)\n#else\n"
        "gemm(unsigned bar, unsigned smem, const void* desc, int k)\n"
        "#endif  // WIDE: the signature of the kernel for 64-bit problem sizes, chosen at build time\n{",
    )
    gates, findings = run(arms)
    assert "ARCH007" not in {f.rule for f in findings}
    assert any(f.notes == "around the gate, in `gemm`" for g in gates for f in g.features)
