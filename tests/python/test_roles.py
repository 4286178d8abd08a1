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
