"""Sources built only for another generation are listed, not judged (``fixtures/builds``)."""

from __future__ import annotations

from auditor import arch
from auditor.cuda.gates import scan_bytes
from auditor.model import Reach
from auditor.pipeline import Options, audit
from auditor.pipeline.builds import manifest_builds, serves
from auditor.sources import language_of
from tests.conftest import FIXTURES

TREE = FIXTURES / "builds"


def _scan(targets: str = "12.0,12.1", **kw):
    return audit([str(TREE)], Options(jobs=1, targets=arch.parse_targets(targets), **kw))


def test_what_only_one_other_generation_builds_is_not_judged():
    result = _scan()
    reach = {g.file: g.reach for g in result.gates if g.language == "cuda"}
    assert reach == {
        "pkg/csrc/softmax.cu": Reach.UNBUILT,  # its JIT spec builds it for [10] alone
        "pkg/csrc/softmax_tail.cuh": Reach.UNBUILT,  # only softmax.cu includes it
        "pkg/csrc/shared.cuh": Reach.REACHED,  # norm.cu, built for every target, includes it too
        "pkg/csrc/comm.cu": Reach.REACHED,  # [9, 10]: a list to widen, and this is what 12.x meets then
        "pkg/third_party/deep/gemm_impl.cuh": Reach.UNBUILT,  # compiled at run time for sm_90a alone
        "pkg/prebuilt/csrc/rms_kernel.cu": Reach.UNBUILT,  # build.json: sm_100a and sm_103a
        "pkg/prebuilt/csrc/scale_kernel.cu": Reach.REACHED,  # build.json: sm_100a and sm_120a
        "pkg/csrc/rowsum_prog.cu": Reach.UNBUILT,  # Program(targets=("sm_100a", "sm_103a"))
        "pkg/csrc/scale_prog.cu": Reach.REACHED,  # Program(targets=("sm_100a", "sm_120a"))
    }
    rules = {(f.file, f.rule) for f in result.findings}
    assert ("pkg/csrc/comm.cu", "ARCH001") in rules
    comm = next(f for f in result.findings if f.file == "pkg/csrc/comm.cu")
    assert "12.0, 12.1 are not built here yet: the build flags at pkg/jit/modules.py:14 leave them out" in comm.message
    assert {g.file: g.built_by for g in result.gates if g.built_by} == {"pkg/csrc/comm.cu": ("pkg/jit/modules.py:14",)}
    assert ("pkg/jit/modules.py", "ARCH002") in rules  # the [9, 10] list itself
    assert ("pkg/prebuilt/csrc/scale_kernel.cu", "ARCH007") in rules
    assert ("pkg/csrc/scale_prog.cu", "ARCH007") in rules
    assert not {f for f, _ in rules} & {f for f, r in reach.items() if r == Reach.UNBUILT}
    assert {f.file for f in _scan(unreached=True).findings} >= {"pkg/csrc/softmax_tail.cuh"}


def test_a_target_of_the_built_generation_judges_them():
    reach = {g.file: g.reach for g in _scan("10.0").gates}
    assert reach["pkg/csrc/softmax.cu"] == Reach.REACHED
    assert reach["pkg/third_party/deep/gemm_impl.cuh"] == Reach.UNBUILT  # sm_90a serves no 10.0


def test_run_time_compile_options():
    twelve = arch.parse_targets("12.0,12.1")
    assert not serves(("sm_90a",), twelve)
    assert serves(("sm_120a",), twelve)
    assert serves(("sm_90a", "sm_100a"), twelve)  # two generations: a list to judge
    assert serves((), twelve)
    scanned = scan_bytes("a.cu", b'#include <x.h>\nconst char* o[] = {"-std=c++17", "--gpu-architecture=sm_90a"};')
    assert scanned.compiles_for == ("sm_90a",)


def test_a_json_build_manifest_says_what_each_source_is_built_for():
    manifest = TREE / "pkg/prebuilt/build.json"
    assert language_of("pkg/prebuilt/build.json", manifest.read_bytes()[:4096]) == "manifest"
    assert language_of("pkg/prebuilt/config.json", b'{"block_m": 64}') is None  # a JSON that names no target
    built = manifest_builds("pkg/prebuilt/build.json", manifest.read_bytes())
    assert built == {
        "pkg/prebuilt/csrc/rms_kernel.cu": {"10.0", "10.3"},  # each library entry's own target
        "pkg/prebuilt/csrc/scale_kernel.cu": {"10.0", "12.0"},
    }
    assert manifest_builds("m.json", b'{"sources": ["k.cu"]}') == {"k.cu": set()}  # built for anything
    assert manifest_builds("m.json", b"{not json") == {}


def test_a_large_json_file_is_data_not_read(tmp_path):
    """A tokenizer or a tuning table is no build manifest: neither read nor an error."""
    from auditor.sources import MAX_MANIFEST_BYTES, provider_for

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "vocab.json").write_text('{"sm_90": "' + "x" * MAX_MANIFEST_BYTES + '"}')
    (tmp_path / "pkg" / "build.json").write_text('{"arch": "sm_100a", "sources": ["k.cu"]}')
    items = list(provider_for(str(tmp_path)).collect())
    assert [(i.path, i.language) for i in items] == [("pkg/build.json", "manifest")]
