"""A test that pins the problem's shape beside the architecture chooses for one shape (ARCH014).

``num_q_heads == 36 and head_dim == 128 and capability == (12, 0)`` is a schedule measured for
one model on one part: 12.1 runs the general path for that shape. It is listed low, at the test
and at the calls of the function that holds it, and never as a minor-version trap.
"""

from __future__ import annotations

from auditor import pipeline
from auditor.model import SourceFile

PLANNER = """\
import torch


def _is_laguna_decode(q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim):
    return bool(
        q_dtype == torch.bfloat16
        and kv_dtype == torch.float8_e4m3fn
        and int(num_q_heads) == 24
        and int(num_kv_heads) == 4
        and int(head_dim) == 128
        and tuple(torch.cuda.get_device_capability()) == (12, 0)
    )


def plan(q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim):
    if _is_laguna_decode(q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim):
        return "flat"
    return "generic"
"""


def run(text: str):
    source = SourceFile("pkg/planner.py", text.encode(), "python", "t")
    return pipeline.audit_input([source], "t", pipeline.Options(jobs=1))[1]


def test_a_test_for_one_shape_on_one_part_is_listed_low_with_its_shape():
    findings = run(PLANNER)
    assert {f.rule for f in findings} == {"ARCH014"}
    (f,) = findings
    assert f.severity == "low" and "(for one problem shape: num_q_heads, num_kv_heads, head_dim)" in f.message
    # the call of the function holding it chooses for that shape too, and folds into it
    assert f.line == 11 and f.also == (("pkg/planner.py", 16),)


def test_the_same_test_without_the_shape_is_a_minor_version_trap():
    bare = PLANNER.replace("int(num_q_heads) == 24\n        and int(num_kv_heads) == 4\n        and ", "")
    assert {f.rule for f in run(bare)} == {"ARCH003"}


def test_one_pinned_parameter_is_not_a_shape():
    one = PLANNER.replace(
        "int(num_q_heads) == 24\n        and int(num_kv_heads) == 4\n        and int(head_dim) == 128",
        "int(head_dim) == 128",
    )
    assert "ARCH014" not in {f.rule for f in run(one)}


FLAGS = """\
import torch

_ROW_SPAN_CAPABILITIES = ((9, 0), (10, 0), (10, 3))


def _row_span_capability():
    return tuple(torch.cuda.get_device_capability()) in _ROW_SPAN_CAPABILITIES


def row_span_flag(cluster):
    \"\"\"The launch bit that picks the filter arm from the whole row: set on Hopper, B200 and
    GB300, where those cells run 2-5 % faster; Rubin measures neutral, so nothing else.\"\"\"
    if cluster < 8:
        return 0
    return 32 if _row_span_capability() else 0
"""


def test_a_choice_its_docstring_measured_is_a_speed_choice():
    (f,) = [f for f in run(FLAGS) if f.line == 15]
    assert (
        f.rule == "ARCH014"
        and 'measured: "GB300, where those cells run 2-5 % faster; Rubin measures neutral, so nothing else.")'
        in f.message
    )
    unmeasured = FLAGS.replace(", where those cells run 2-5 % faster; Rubin measures neutral, so nothing else", "")
    assert [f.rule for f in run(unmeasured) if f.line == 15] == ["ARCH002"]


FUSED = """\
import torch


def _fused_supported():
    return torch.cuda.get_device_capability()[0] in (9, 10)


def denoise(x, fused_kernel, split_kernels):
    # The fused path is faster on Blackwell and on single-GPU Hopper.
    use_fused = _fused_supported()
    if use_fused:
        return fused_kernel(x)
    return split_kernels(x)
"""


def test_a_comment_that_one_path_is_faster_on_a_part_makes_the_flag_a_speed_choice():
    assert {f.rule for f in run(FUSED)} == {"ARCH014"}
    plain = FUSED.replace("    # The fused path is faster on Blackwell and on single-GPU Hopper.\n", "")
    assert "ARCH014" not in {f.rule for f in run(plain)} and {f.rule for f in run(plain)}


ROWS = """\
import torch

_PRODUCTION_SHAPES = frozenset({(2, 5120, 8192), (4, 5120, 8192)})


def gemm(x, w):
    m, k = x.shape
    n = w.shape[1]
    capability = torch.cuda.get_device_capability(x.device)
    if capability == (12, 0) and (m, k, n) in _PRODUCTION_SHAPES:
        return "skinny"
    return "generic"
"""


def test_a_shape_looked_up_in_a_table_of_rows_is_pinned():
    """``(m, k, n) in SHAPES``: a GEMM's m, n, k pinned together to the rows a part was tuned on."""
    (f,) = run(ROWS)
    assert f.rule == "ARCH014" and "(for one problem shape: m, k, n)" in f.message
    assert {f.rule for f in run(ROWS.replace(" and (m, k, n) in _PRODUCTION_SHAPES", ""))} == {"ARCH003"}


QUALIFIED = '''\
import torch


def gdn_prefill_default(config):
    """FlashInfer for the narrow SM90/SM100 GDN prefill domains we validated, else None."""
    major = torch.cuda.get_device_capability()[0]
    if config.deterministic or major not in (9, 10):
        return None
    return "flashinfer"
'''


def test_a_choice_made_on_the_parts_it_was_validated_on_is_a_speed_choice():
    """The author qualified the backend on 9.x and 10.x: on 12.x it is a measurement to make,
    not a list that forgot the target."""
    findings = run(QUALIFIED)
    assert [(f.rule, f.severity) for f in findings] == [("ARCH014", "low")]
    assert "we validated" in findings[0].message
    assert [f.rule for f in run(QUALIFIED.replace(" we validated", ""))] == ["ARCH002"]


ROUTER = """\
import torch


def gate(scores, bias, topk):
    if (
        torch.cuda.get_device_capability(scores.device) == (12, 0)
        and scores.shape[1] == 512
        and topk == 22
    ):
        return small_m_gate(scores, bias, topk)
    return general_gate(scores, bias, topk)
"""


def test_a_tensor_dimension_pinned_to_a_number_is_a_shape_parameter():
    """``scores.shape[1] == 512 and topk == 22``: a router kernel for one model's expert count."""
    (f,) = run(ROUTER)
    assert (f.rule, f.severity) == ("ARCH014", "low") and "(for one problem shape: shape[1], topk)" in f.message
    assert [f.rule for f in run(ROUTER.replace("        and scores.shape[1] == 512\n", ""))] == ["ARCH003"]


def test_a_long_condition_keeps_its_later_shape_tests():
    """Eleven tests before ``topk == 22`` (dtypes, strides, ``is not None``): the gate still
    records it, and the choice is for one shape."""
    checks = "".join(f"        and scores.stride({i}) == 1\n" for i in range(10))
    long = ROUTER.replace("        and scores.shape[1] == 512\n", "        and scores.shape[1] == 512\n" + checks)
    (f,) = run(long)
    assert f.rule == "ARCH014" and "shape[1], topk" in f.message
