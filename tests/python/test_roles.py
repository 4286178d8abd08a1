"""Branch roles read from bodies: rejections, log-only and tuning-only branches, the code a condition admits."""

from __future__ import annotations

import pytest

from auditor.model import Guards, SourceFile
from auditor.pipeline import Options, audit_input

HEAD = "import logging\nimport torch\nlogger = logging.getLogger(__name__)\n\n\ndef f(unsupported):\n"
HEAD += "    major, minor = torch.cuda.get_device_capability()\n    if major >= 12:\n"


def guards(body: str) -> Guards:
    text = HEAD + "".join(f"        {line}\n" for line in body.splitlines()) + "    return True, None\n"
    gates, _, errors = audit_input([SourceFile("m.py", text.encode(), "python", "t")], "t", Options(jobs=1))
    assert errors == []
    (gate,) = [g for g in gates if g.line == 8]
    return gate.guards


@pytest.mark.parametrize(
    "body,expected",
    [
        ('raise RuntimeError("no")', Guards.REJECT),
        ('return False, "not tuned for 12.x"', Guards.REJECT),
        ('return (False, "not tuned for 12.x")', Guards.REJECT),
        ('unsupported.append("12.x")', Guards.REJECT),
        ('logger.warning("untested")\nreturn False, "untested"', Guards.REJECT),
        ('logger.warning("untested on 12.x")', Guards.LOG),
        ('logger.info("a")\nprint("b")', Guards.LOG),
        ('"""A note."""\nlogger.warning_once("c")', Guards.LOG),
        ('logger.warning("x")\nuse_fast = False', Guards.TAKE),
        ("use_fast = False", Guards.TAKE),
        ("seen.append(12)", Guards.TAKE),
        ("BLOCK_N, num_warps = 64, 4", Guards.TUNE),
        ("self.split_k = 1\nnum_stages += 1", Guards.TUNE),
        ('BLOCK_N, target_splits = pick(rows)\nlogger.info("sm120 table")', Guards.TUNE),
        ("BLOCK_N, backend = 64, 'fa3'", Guards.TAKE),
        ("block_table = None", Guards.TAKE),
        ("num_warps = 4\nrun_fast()", Guards.TAKE),
    ],
)
def test_role_from_body(body, expected):
    assert guards(body) == expected


CONFIGURED = """\
import torch


def _configuration(heads, capability):
    return (64, 8, 2, 128, heads < 64 and capability not in ((12, 0), (12, 1)), None)


def prepare(q, heads):
    capability = torch.cuda.get_device_capability(q.device)
    block_h, block_n, splits, split_len, trans_qk, num_ctas = _configuration(heads, capability)
    parameters = (q, block_h, block_n, splits, trans_qk)
    return launch(parameters)
"""


def test_a_flag_unpacked_with_tuning_values_and_handed_to_a_kernel_tunes():
    """flashinfer 0.7.1's cuTile MLA: ``trans_qk`` comes out of one configuration with tile
    sizes and splits and is one of the kernel's parameters: the same kernel either way."""
    text = CONFIGURED.encode()
    gates, findings, _ = audit_input([SourceFile("m.py", text, "python", "t")], "t", Options(jobs=1))
    (flag,) = [g for g in gates if g.line == 11]
    assert flag.guards == Guards.TUNE and findings == []
    # unpacked beside names that are no tuning values, the flag switches code: reported
    untuned = CONFIGURED.replace("block_h, block_n, splits, split_len", "q_desc, k_desc, v_desc, split_len")
    _, findings, _ = audit_input([SourceFile("m.py", untuned.encode(), "python", "t")], "t", Options(jobs=1))
    assert [f.rule for f in findings] == ["ARCH001"]
