"""Code that needs a system feature no 12.x machine has (NVLink multicast) is reached from the
gate in front of it: through the class its guarded lines name, and through the sources its JIT
flags build and the headers they include. Only then does the gate agree with the platform
(ARCH016, info); a module that merely holds multicast code elsewhere does not."""

from __future__ import annotations

from tests.conftest import audit_texts

HANDLER = """\
import torch
from cuda.bindings import driver as cuda

from pkg.utils import backend_requirement, supported_compute_capability


class MulticastHandler:
    def __init__(self, prop):
        self.mc = cuda.cuMulticastCreate(prop)


@supported_compute_capability([90, 100])
def _check(op, handler: MulticastHandler, x):
    if x.ndim < 2:
        raise ValueError("x.ndim should be at least 2")
    return True


@backend_requirement({}, common_check=_check)
def mixed_allreduce(op, handler, x):
    return handler.run(op, x)
"""

UTILS = """\
import torch


def supported_compute_capability(supported):
    def wrap(fn):
        return fn

    return wrap


def backend_requirement(backends, common_check=None):
    def wrap(fn):
        return fn

    return wrap
"""

JIT = """\
def gen_mixed_module():
    sources = [CSRC / "mixed.cu"]
    template = CSRC / "mixed_inst.jinja"
    flags = get_nvcc_flags_list(supported_major_versions=[9, 10])
    return gen_jit_spec("mixed", sources, extra_cuda_cflags=flags)


def gen_plain_module():
    flags = get_nvcc_flags_list(supported_major_versions=[9, 10])
    return gen_jit_spec("plain", [CSRC / "plain.cu"], extra_cuda_cflags=flags)
"""

TEMPLATE = '#include "pkg/comm/mixed.cuh"\n'
HEADER = '__device__ void add(unsigned* p, unsigned v) {\n  asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" :: "l"(p), "r"(v));\n}\n'
PLAIN = "__global__ void k(float* x) { x[0] = 1.f; }\n"


run = audit_texts


def test_a_check_on_a_handler_whose_class_creates_multicast_objects_agrees_with_the_platform():
    gates, findings = run({"pkg/comm/mixed.py": HANDLER, "pkg/utils.py": UTILS})
    (f,) = [f for f in findings if f.file == "pkg/comm/mixed.py"]
    assert f.rule == "ARCH016" and f.severity == "info"
    assert "`cuMulticastCreate` (pkg/comm/mixed.py:9)" in f.message and "12.x parts have no NVLink" in f.message


def test_without_the_handler_the_same_list_is_an_allow_list_that_omits_the_target():
    plain = HANDLER.replace("handler: MulticastHandler, ", "")
    _, findings = run({"pkg/comm/mixed.py": plain, "pkg/utils.py": UTILS})
    assert [f.rule for f in findings if f.file == "pkg/comm/mixed.py"] == ["ARCH002"]


def test_jit_flags_reach_multimem_through_the_template_and_the_header_it_includes():
    _, findings = run(
        {
            "pkg/jit/comm.py": JIT,
            "pkg/csrc/mixed.cu": PLAIN,
            "pkg/csrc/mixed_inst.jinja": TEMPLATE,
            "pkg/include/pkg/comm/mixed.cuh": HEADER,
            "pkg/csrc/plain.cu": PLAIN,
        }
    )
    by_line = {f.line: f for f in findings if f.file == "pkg/jit/comm.py"}
    assert by_line[4].rule == "ARCH016" and "multimem.red.release.sys.global.add.u32" in by_line[4].message
    assert by_line[4].message.count("pkg/include/pkg/comm/mixed.cuh:2") == 1
    assert by_line[9].rule == "ARCH002"  # plain.cu needs nothing beyond the instruction set


def test_multicast_code_elsewhere_in_the_module_is_not_behind_the_gate():
    """A rejection whose guarded lines name neither the class nor its objects (the backend
    resolver beside a workspace manager that allocates multicast memory) stays judged."""
    module = HANDLER.replace(
        "@supported_compute_capability([90, 100])\ndef _check(op, handler: MulticastHandler, x):",
        "def _check(op, x):\n    if torch.cuda.get_device_capability()[0] not in (9, 10):\n        raise ValueError('requires SM90 or SM10X')",
    )
    gates, findings = run({"pkg/comm/mixed.py": module, "pkg/utils.py": UTILS})
    assert not any(g.platform for g in gates)
    assert "ARCH016" not in {f.rule for f in findings}


PEER_ALLREDUCE = """\
#include <cuda_runtime.h>

bool memop_supported() {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 12 && minor == 0;
}

size_t workspace_bytes(int world_size) {
  if (memop_supported()) {
    return 64 * world_size;
  }
  return 0;
}

void peer_ipc_all_reduce(const float* in, float* out, int world_size) {}
"""


def test_a_gate_in_a_collective_over_peer_memory_agrees_that_12_1_machines_have_one_gpu():
    """GB10 is the only GPU of its machine: an all-reduce over IPC peer memory never runs there,
    so a test that leaves 12.1 out of its memop mode loses 12.1 nothing."""
    gates, findings = run({"pkg/csrc/peer_ipc_all_reduce.cu": PEER_ALLREDUCE})
    (f,) = [f for f in findings if f.line == 11]
    assert f.rule == "ARCH016" and f.severity == "info"
    assert "`peer_ipc_all_reduce` (pkg/csrc/peer_ipc_all_reduce.cu:17)" in f.message
    assert "only GPU in its machine" in f.message


def test_the_same_gate_in_a_single_gpu_kernel_file_is_a_minor_version_trap():
    text = PEER_ALLREDUCE.replace("peer_ipc_all_reduce", "rms_norm")
    gates, findings = run({"pkg/csrc/rms_norm.cu": text})
    assert [f.rule for f in findings if f.line == 11] == ["ARCH003"]


def test_a_gate_that_also_turns_12_0_away_is_not_excused_by_the_one_gpu_of_12_1():
    text = PEER_ALLREDUCE.replace("major == 12 && minor == 0", "major >= 9 && major < 12")
    gates, findings = run({"pkg/csrc/peer_ipc_all_reduce.cu": text})
    assert [f.rule for f in findings if f.line == 11] == ["ARCH001"]


def test_a_feature_is_found_present_exactly_where_pythons_own_patterns_find_it():
    """The one-pass RE2 check agrees with the patterns :func:`platform.needs` reads with: at a
    word's edge, after a dot or a letter, at the start, and in text that is not ASCII."""
    from auditor.facts import platform

    texts = [
        "x = cuMulticastCreate(p)",
        "cuMulticastCreate(p)",
        "my_cuMulticastCreate(p)",
        'asm volatile("multimem.ld_reduce.add.f32 %0, [%1];")',
        'asm("xmultimem.red.add")',
        "a.multimem.red.add",
        "cudaIpcOpenMemHandle(&p, h);",
        "écudaIpcOpenMemHandle(&p, h);",
        "é = cudaIpcOpenMemHandle(&p, h)",
        "mémoire: multimem.st.global",
        "nothing to see here",
        "",
    ]
    for fact in platform.facts():
        for text in texts:
            expected = bool(fact.identifiers.search(text) or fact.ptx.search(text))
            assert fact.present(text) is expected, (fact.id, text)
    assert any(f.present(texts[0]) for f in platform.facts())
    assert not any(f.present(texts[-2]) for f in platform.facts())
