"""A flag a caller passes in settles the branch it feeds (``auditor/pipeline/arguments.py``)."""

from __future__ import annotations

from auditor import pipeline
from auditor.model import SourceFile

SUPPORT = """\
import torch


def is_sm100_or_newer():
    return torch.cuda.get_device_capability()[0] >= 10


def is_deep_select_supported():
    return torch.cuda.get_device_capability() in ((9, 0), (10, 0), (10, 3))
"""

INDEXER = """\
from pkg.support import is_deep_select_supported


class Indexer:
    def __init__(self, use_deep_gemm: bool):
        self.use_deep_select = not use_deep_gemm and is_deep_select_supported()

    def decode(self, scores):
        if self.use_deep_select:
            return scores.topk(8)
        return scores.sort()
"""

FACTORY = """\
from pkg.indexer import Indexer
from pkg.support import is_sm100_or_newer


def make_indexer():
    return Indexer(use_deep_gemm=is_sm100_or_newer())
"""


def run(**files: str):
    sources = [SourceFile(f"pkg/{name}.py", text.encode(), "python", "t") for name, text in files.items()]
    return pipeline.audit_input(sources, "t", pipeline.Options(jobs=1))


def test_a_flag_every_caller_passes_true_on_the_target_settles_the_branch():
    gates, findings, _ = run(support=SUPPORT, indexer=INDEXER, factory=FACTORY)
    settled = {g.line: g.settled for g in gates if g.file == "pkg/indexer.py"}
    assert settled == {6: ("12.0", "12.1"), 9: ("12.0", "12.1")}  # the definition and its use
    assert findings == []


def test_a_positional_argument_is_bound_too():
    positional = FACTORY.replace("use_deep_gemm=is_sm100_or_newer()", "is_sm100_or_newer()")
    gates, findings, _ = run(support=SUPPORT, indexer=INDEXER, factory=positional)
    assert findings == []


def test_one_caller_that_passes_another_value_leaves_the_list():
    other = FACTORY + "\n\ndef make_plain():\n    return Indexer(False)\n"
    gates, findings, _ = run(support=SUPPORT, indexer=INDEXER, factory=other)
    assert all(not g.settled for g in gates)
    assert {(f.rule, f.line) for f in findings} == {("ARCH002", 6), ("ARCH002", 9)}
    unknown = FACTORY.replace("is_sm100_or_newer()", "os.environ.get('DEEP_GEMM') == '1'")
    gates, _, _ = run(support=SUPPORT, indexer=INDEXER, factory="import os\n" + unknown)
    assert all(not g.settled for g in gates)


def test_trees_released_and_parsed_again_settle_the_same(monkeypatch):
    """Issue #20: a bounded number of ``ast`` trees is kept (a large input's callers cost a
    gigabyte kept all); keeping one at a time settles what keeping them all settles."""
    from auditor.pipeline import arguments

    parsed: list[str] = []
    real = arguments._parsed
    monkeypatch.setattr(arguments, "_parsed", lambda data: parsed.append(data) or real(data))
    many = run(support=SUPPORT, indexer=INDEXER, factory=FACTORY)
    everything = len(parsed)
    monkeypatch.setattr(arguments, "AST_BYTES", 0)
    assert run(support=SUPPORT, indexer=INDEXER, factory=FACTORY)[0] == many[0]
    assert len(parsed) > 2 * everything and any(g.settled for g in many[0])
