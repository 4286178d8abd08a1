"""Generate ``auditor/data/ptx-facts.json``: which PTX instruction variants each toolkit's ptxas accepts per target.

Why: whether guarded code can run on a target depends on the exact instruction *variant*, not on its opcode: plain
``cp.async.bulk.tensor`` assembles for sm_90 and sm_120, while its ``.cta_group::2`` form is rejected on sm_120a. A
hand-typed table cannot keep up with qualifiers, targets and toolkits, so every fact here is what ptxas said.

How: each probe below is one instruction. It is wrapped in a tiny kernel (``MODULE``) whose ``.version`` is the newest
PTX ISA that toolkit's ptxas accepts and whose ``.target`` is the target, and assembled with
``ptxas --gpu-name <target>`` for every ``sm_*`` target of every toolkit (``gen_toolkit_targets.TOOLKITS``, wheels
cached as described there), two ptxas processes at a time. A probe no target of any toolkit accepts is a broken probe
(wrong PTX, not a fact) and makes the script fail, as does a probe whose pattern does not match its own instruction.

A probe's ``pattern`` is built from its ``spec``: dot-separated tokens in the order PTX writes them, each a literal
or a small regex (``[1-5]d``, ``(e4m3|e5m2)``); ``*`` stands for any other qualifiers. The regex is anchored at the
opcode and matches one whole instruction; more tokens (``specificity``) means a more specific row.

Usage::

    python scripts/gen_ptx_facts.py                 # write auditor/data/ptx-facts.json (about 5 minutes)
    python scripts/gen_ptx_facts.py --check         # exit 1 if the shipped table differs from what ptxas says
    python scripts/gen_ptx_facts.py --toolkits 13.0.88 --probes tma_ --print   # look at a few probes, write nothing
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_toolkit_targets import TOOLKITS, dump, ensure_toolkit, ptx_isa, ptxas_targets, version_key  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "auditor" / "data" / "ptx-facts.json"
ABOUT = (
    "Which PTX instruction variants ptxas accepts, per toolkit and sm_* target. Each probe is one instruction "
    "assembled alone (ptxas --gpu-name T, .target T, .version = the toolkit's newest PTX ISA). 'pattern' is a regex "
    "for re.match over one instruction (predicate guard removed, whitespace collapsed); when several rows match, the "
    "one with the highest 'specificity' names the variant, and a target admits the instruction only if every "
    "matching row accepts it. Per toolkit: 'accepted' targets; 'errors' maps ptxas's first error line ({target} "
    "stands for the target) to the targets it rejected; 'advisories' likewise for accepted targets. "
    "Regenerate with scripts/gen_ptx_facts.py."
)
MODULE = """.version {isa}
.target {target}
.address_size 64

.visible .entry probe()
{{
\t.reg .pred p<4>;
\t.reg .b8 b<4>;
\t.reg .b16 h<8>;
\t.reg .b32 r<24>;
\t.reg .b64 rd<8>;
\t.reg .f32 f<16>;
\t.reg .f64 d<8>;
{decls}\t{ptx}
\tret;
}}
"""
JOBS = 2
"""ptxas processes at once: the machine's two cores are shared."""


class Probe(NamedTuple):
    id: str
    family: str
    spec: str
    ptx: str
    decls: str = ""
    """Extra register declarations only this probe needs (kept out of MODULE so old targets still parse it)."""


F4 = "{f1, f2, f3, f4}"
F4C = "{f5, f6, f7, f8}"
R4 = "{r1, r2, r3, r4}"
R2 = "{r5, r6}"
SCALES = "r7, {0, 0}, r8, {0, 0}"

PROBES = [
    # Baseline: must be accepted everywhere; catches a broken MODULE.
    Probe("shfl_sync", "baseline", "shfl.sync.*", "shfl.sync.bfly.b32 r5, r1, 1, 0x1f, 0xffffffff;"),
    Probe("cp_async_cg", "cp.async", "cp.async.(ca|cg).shared.global.*", "cp.async.cg.shared.global [r1], [rd1], 16;"),
    # TMA: cp.async.bulk.tensor and friends.
    Probe(
        "tma_load_cluster",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.shared::cluster.global.*",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [r1], [rd1, {r2, r3}], [r4];",
    ),
    Probe(
        "tma_load_cta",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.shared::cta.global.*",
        "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [r1], [rd1, {r2, r3}], [r4];",
    ),
    Probe(
        "tma_load_multicast",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.shared::cluster.global.*.multicast::cluster.*",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [r1], [rd1, {r2, r3}], [r4], h1;",
    ),
    Probe(
        "tma_load_cache_hint",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.shared::cluster.global.*.L2::cache_hint",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [r1], [rd1, {r2, r3}], [r4], rd2;",
    ),
    Probe(
        "tma_load_im2col",
        "tma",
        "cp.async.bulk.tensor.[3-5]d.shared::cluster.global.im2col.*",
        "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [r1], [rd1, {r2, r3, r5}], [r4], {h1};",
    ),
    Probe(
        "tma_load_im2col_w",
        "tma",
        "cp.async.bulk.tensor.[3-5]d.shared::cluster.global.im2col::w.*",
        "cp.async.bulk.tensor.3d.shared::cluster.global.im2col::w.mbarrier::complete_tx::bytes"
        " [r1], [rd1, {r2, r3, r5}], [r4], {h1, h2};",
    ),
    Probe(
        "tma_load_im2col_w128",
        "tma",
        "cp.async.bulk.tensor.[3-5]d.shared::cluster.global.im2col::w::128.*",
        "cp.async.bulk.tensor.3d.shared::cluster.global.im2col::w::128.mbarrier::complete_tx::bytes"
        " [r1], [rd1, {r2, r3, r5}], [r4], {h1, h2};",
    ),
    Probe(
        "tma_load_gather4",
        "tma",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.*",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes"
        " [r1], [rd1, {r2, r3, r5, r6, r7}], [r4];",
    ),
    Probe(
        "tma_load_cta_group1",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.shared::cluster.global.*.cta_group::1.*",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.cta_group::1"
        " [r1], [rd1, {r2, r3}], [r4];",
    ),
    Probe(
        "tma_load_cta_group2",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.shared::cluster.global.*.cta_group::2.*",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.cta_group::2"
        " [r1], [rd1, {r2, r3}], [r4];",
    ),
    Probe(
        "tma_load_multicast_cta_group2",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.shared::cluster.global.*.multicast::cluster.*.cta_group::2.*",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.cta_group::2"
        " [r1], [rd1, {r2, r3}], [r4], h1;",
    ),
    Probe(
        "tma_store",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.global.shared::cta.*",
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [rd1, {r2, r3}], [r1];",
    ),
    Probe(
        "tma_store_cache_hint",
        "tma",
        "cp.async.bulk.tensor.[1-5]d.global.shared::cta.*.L2::cache_hint",
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [rd1, {r2, r3}], [r1], rd2;",
    ),
    Probe(
        "tma_store_scatter4",
        "tma",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.*",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group [rd1, {r2, r3, r5, r6, r7}], [r1];",
    ),
    Probe(
        "tma_reduce",
        "tma",
        "cp.reduce.async.bulk.tensor.[1-5]d.global.shared::cta.*",
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [rd1, {r2, r3}], [r1];",
    ),
    Probe(
        "tma_prefetch",
        "tma",
        "cp.async.bulk.prefetch.tensor.[1-5]d.L2.global.*",
        "cp.async.bulk.prefetch.tensor.2d.L2.global [rd1, {r2, r3}];",
    ),
    Probe("prefetch_tensormap", "tma", "prefetch.*.tensormap", "prefetch.tensormap [rd1];"),
    Probe(
        "tensormap_replace",
        "tma",
        "tensormap.replace.*",
        "tensormap.replace.tile.global_address.shared::cta.b1024.b64 [r1], rd1;",
    ),
    Probe(
        "tensormap_cp_fenceproxy",
        "tma",
        "tensormap.cp_fenceproxy.*",
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [rd1], [r1], 128;",
    ),
    # Non-tensor bulk copies.
    Probe(
        "bulk_g2s_cluster",
        "bulk-copy",
        "cp.async.bulk.shared::cluster.global.*",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [r1], [rd1], r2, [r4];",
    ),
    Probe(
        "bulk_g2s_cta",
        "bulk-copy",
        "cp.async.bulk.shared::cta.global.*",
        "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [r1], [rd1], r2, [r4];",
    ),
    Probe(
        "bulk_g2s_multicast",
        "bulk-copy",
        "cp.async.bulk.shared::cluster.global.*.multicast::cluster.*",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [r1], [rd1], r2, [r4], h1;",
    ),
    Probe(
        "bulk_g2s_cache_hint",
        "bulk-copy",
        "cp.async.bulk.shared::cluster.global.*.L2::cache_hint",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [r1], [rd1], r2, [r4], rd2;",
    ),
    Probe(
        "bulk_s2s_cluster",
        "bulk-copy",
        "cp.async.bulk.shared::cluster.shared::cta.*",
        "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [r1], [r2], r3, [r4];",
    ),
    Probe(
        "bulk_s2g",
        "bulk-copy",
        "cp.async.bulk.global.shared::cta.*",
        "cp.async.bulk.global.shared::cta.bulk_group [rd1], [r1], r2;",
    ),
    Probe(
        "bulk_s2g_cp_mask",
        "bulk-copy",
        "cp.async.bulk.global.shared::cta.*.cp_mask",
        "cp.async.bulk.global.shared::cta.bulk_group.cp_mask [rd1], [r1], r2, h1;",
    ),
    Probe(
        "bulk_reduce",
        "bulk-copy",
        "cp.reduce.async.bulk.global.shared::cta.*",
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [rd1], [r1], r2;",
    ),
    Probe("bulk_commit_group", "bulk-copy", "cp.async.bulk.commit_group", "cp.async.bulk.commit_group;"),
    Probe("bulk_wait_group", "bulk-copy", "cp.async.bulk.wait_group.*", "cp.async.bulk.wait_group.read 0;"),
    Probe(
        "bulk_prefetch_l2",
        "bulk-copy",
        "cp.async.bulk.prefetch.L2.global.*",
        "cp.async.bulk.prefetch.L2.global [rd1], r2;",
    ),
    Probe("st_bulk", "bulk-copy", "st.bulk.*", "st.bulk.weak.shared::cta [r1], rd2, 0;"),
    # mbarrier.
    Probe("mbarrier_init", "mbarrier", "mbarrier.init.*", "mbarrier.init.shared::cta.b64 [r1], r2;"),
    Probe("mbarrier_arrive", "mbarrier", "mbarrier.arrive.*", "mbarrier.arrive.shared::cta.b64 rd1, [r1];"),
    Probe(
        "mbarrier_arrive_remote",
        "mbarrier",
        "mbarrier.arrive.*.shared::cluster.*",
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [r1];",
    ),
    Probe(
        "mbarrier_arrive_expect_tx",
        "mbarrier",
        "mbarrier.arrive.expect_tx.*",
        "mbarrier.arrive.expect_tx.shared::cta.b64 rd1, [r1], r2;",
    ),
    Probe(
        "mbarrier_arrive_expect_tx_cluster",
        "mbarrier",
        "mbarrier.arrive.expect_tx.*.cluster.shared::cluster.*",
        "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [r1], r2;",
    ),
    Probe(
        "mbarrier_expect_tx",
        "mbarrier",
        "mbarrier.expect_tx.*",
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [r1], r2;",
    ),
    Probe(
        "mbarrier_try_wait_parity",
        "mbarrier",
        "mbarrier.try_wait.parity.*",
        "mbarrier.try_wait.parity.shared::cta.b64 p1, [r1], r2;",
    ),
    Probe(
        "mbarrier_try_wait_parity_acquire_cluster",
        "mbarrier",
        "mbarrier.try_wait.parity.acquire.cluster.*",
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p1, [r1], r2;",
    ),
    Probe(
        "mbarrier_try_wait_parity_relaxed",
        "mbarrier",
        "mbarrier.try_wait.parity.relaxed.*",
        "mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 p1, [r1], r2;",
    ),
    Probe(
        "mbarrier_test_wait_parity",
        "mbarrier",
        "mbarrier.test_wait.parity.*",
        "mbarrier.test_wait.parity.shared::cta.b64 p1, [r1], r2;",
    ),
    Probe(
        "cp_async_mbarrier_arrive",
        "mbarrier",
        "cp.async.mbarrier.arrive.*",
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [r1];",
    ),
    # Fences.
    Probe("fence_proxy_async", "fence", "fence.proxy.async.*", "fence.proxy.async.shared::cta;"),
    Probe(
        "fence_proxy_tensormap",
        "fence",
        "fence.proxy.tensormap::generic.*",
        "fence.proxy.tensormap::generic.acquire.gpu [rd1], 128;",
    ),
    Probe(
        "fence_proxy_async_sync_restrict",
        "fence",
        "fence.proxy.async::generic.*.sync_restrict::shared::(cta|cluster).*",
        "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;",
    ),
    Probe("fence_mbarrier_init", "fence", "fence.mbarrier_init.*", "fence.mbarrier_init.release.cluster;"),
    Probe("fence_acq_rel_cluster", "fence", "fence.acq_rel.cluster", "fence.acq_rel.cluster;"),
    Probe(
        "fence_sync_restrict",
        "fence",
        "fence.acquire.sync_restrict::shared::cluster.*",
        "fence.acquire.sync_restrict::shared::cluster.cluster;",
    ),
    # Clusters.
    Probe("barrier_cluster_arrive", "cluster", "barrier.cluster.arrive.*", "barrier.cluster.arrive.release.aligned;"),
    Probe(
        "barrier_cluster_arrive_relaxed",
        "cluster",
        "barrier.cluster.arrive.relaxed.*",
        "barrier.cluster.arrive.relaxed.aligned;",
    ),
    Probe("barrier_cluster_wait", "cluster", "barrier.cluster.wait.*", "barrier.cluster.wait.acquire.aligned;"),
    Probe("mapa", "cluster", "mapa.*", "mapa.shared::cluster.u32 r5, r1, r2;"),
    Probe("getctarank", "cluster", "getctarank.*", "getctarank.shared::cluster.u32 r5, r1;"),
    Probe("ld_shared_cluster", "cluster", "ld.shared::cluster.*", "ld.shared::cluster.u32 r5, [r1];"),
    Probe(
        "st_async",
        "cluster",
        "st.async.*",
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [r1], r2, [r4];",
    ),
    Probe(
        "red_async",
        "cluster",
        "red.async.*",
        "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [r1], r2, [r4];",
    ),
    Probe(
        "clusterlaunchcontrol_try_cancel",
        "cluster",
        "clusterlaunchcontrol.try_cancel.*",
        "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [r1], [r4];",
    ),
    Probe(
        "clusterlaunchcontrol_query_cancel",
        "cluster",
        "clusterlaunchcontrol.query_cancel.*",
        "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p1, q1;",
        "\t.reg .b128 q<2>;\n",
    ),
    # multimem (NVLink SHARP).
    Probe(
        "multimem_ld_reduce",
        "multimem",
        "multimem.ld_reduce.*",
        "multimem.ld_reduce.relaxed.sys.global.add.f32 f1, [rd1];",
    ),
    Probe(
        "multimem_ld_reduce_v4_bf16x2",
        "multimem",
        "multimem.ld_reduce.*.v4.bf16x2",
        "multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2 {r1, r2, r3, r4}, [rd1];",
    ),
    Probe("multimem_st", "multimem", "multimem.st.*", "multimem.st.relaxed.sys.global.f32 [rd1], f1;"),
    Probe("multimem_red", "multimem", "multimem.red.*", "multimem.red.relaxed.sys.global.add.u32 [rd1], r1;"),
    Probe(
        "multimem_cp_async_bulk",
        "multimem",
        "multimem.cp.async.bulk.*",
        "multimem.cp.async.bulk.global.shared::cta.bulk_group [rd1], [r1], r2;",
    ),
    # Warp-specialisation and launch control.
    Probe("setmaxnreg_inc", "setmaxnreg", "setmaxnreg.inc.*", "setmaxnreg.inc.sync.aligned.u32 240;"),
    Probe("setmaxnreg_dec", "setmaxnreg", "setmaxnreg.dec.*", "setmaxnreg.dec.sync.aligned.u32 40;"),
    Probe(
        "griddepcontrol_launch_dependents",
        "griddepcontrol",
        "griddepcontrol.launch_dependents",
        "griddepcontrol.launch_dependents;",
    ),
    Probe("griddepcontrol_wait", "griddepcontrol", "griddepcontrol.wait", "griddepcontrol.wait;"),
    Probe("redux_sync_u32", "redux", "redux.sync.*.(u32|s32|b32)", "redux.sync.add.u32 r5, r1, 0xffffffff;"),
    Probe("redux_sync_f32", "redux", "redux.sync.*.f32", "redux.sync.max.f32 f5, f1, 0xffffffff;"),
    Probe(
        "redux_sync_f32_abs_nan",
        "redux",
        "redux.sync.*.abs.*.f32",
        "redux.sync.min.abs.NaN.f32 f5, f1, 0xffffffff;",
    ),
    Probe("elect_sync", "elect", "elect.sync", "elect.sync r5|p1, 0xffffffff;"),
    # ldmatrix / stmatrix.
    Probe(
        "ldmatrix_b16",
        "ldmatrix",
        "ldmatrix.sync.aligned.m8n8.*.b16",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {r1, r2, r3, r4}, [r5];",
    ),
    Probe(
        "ldmatrix_b16_trans",
        "ldmatrix",
        "ldmatrix.sync.aligned.m8n8.*.trans.*.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {r1, r2, r3, r4}, [r5];",
    ),
    Probe(
        "ldmatrix_m16n16_b8",
        "ldmatrix",
        "ldmatrix.sync.aligned.m16n16.*.b8",
        "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {r1, r2}, [r5];",
    ),
    Probe(
        "ldmatrix_m16n16_b6x16_p32",
        "ldmatrix",
        "ldmatrix.sync.aligned.m16n16.*.b8x16.b6x16_p32",
        "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8x16.b6x16_p32 {r1, r2}, [r5];",
    ),
    Probe(
        "ldmatrix_m8n16_b6x16_p32",
        "ldmatrix",
        "ldmatrix.sync.aligned.m8n16.*.b8x16.b6x16_p32",
        "ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b6x16_p32 {r1}, [r5];",
    ),
    Probe(
        "ldmatrix_m8n16_b4x16_p64",
        "ldmatrix",
        "ldmatrix.sync.aligned.m8n16.*.b8x16.b4x16_p64",
        "ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b4x16_p64 {r1}, [r5];",
    ),
    Probe(
        "stmatrix_b16",
        "stmatrix",
        "stmatrix.sync.aligned.m8n8.*.b16",
        "stmatrix.sync.aligned.m8n8.x4.shared.b16 [r5], {r1, r2, r3, r4};",
    ),
    Probe(
        "stmatrix_b16_trans",
        "stmatrix",
        "stmatrix.sync.aligned.m8n8.*.trans.*.b16",
        "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [r5], {r1, r2, r3, r4};",
    ),
    Probe(
        "stmatrix_m16n8_b8",
        "stmatrix",
        "stmatrix.sync.aligned.m16n8.*.b8",
        "stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [r5], {r1};",
    ),
    # mma.sync (warp-level tensor cores).
    Probe(
        "mma_f16",
        "mma",
        "mma.sync.aligned.m16n8k16.row.col.(f16|f32).f16.f16.(f16|f32)",
        f"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {F4}, {R4}, {R2}, {F4C};",
    ),
    Probe(
        "mma_bf16",
        "mma",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        f"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {F4}, {R4}, {R2}, {F4C};",
    ),
    Probe(
        "mma_tf32",
        "mma",
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        f"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {F4}, {R4}, {R2}, {F4C};",
    ),
    Probe(
        "mma_s8",
        "mma",
        "mma.sync.aligned.m16n8k32.row.col.*.s32.(s8|u8).(s8|u8).s32",
        f"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {{r7, r8, r9, r10}}, {R4}, {R2}, {{r11, r12, r13, r14}};",
    ),
    Probe(
        "mma_f64",
        "mma",
        "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64",
        "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {d1, d2}, {d3}, {d4}, {d5, d6};",
    ),
    Probe(
        "mma_fp8_k32",
        "mma",
        "mma.sync.aligned.m16n8k32.row.col.f32.(e4m3|e5m2).(e4m3|e5m2).f32",
        f"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {F4}, {R4}, {R2}, {F4C};",
    ),
    Probe(
        "mma_fp8_k32_f16_accum",
        "mma",
        "mma.sync.aligned.m16n8k32.row.col.f16.(e4m3|e5m2).(e4m3|e5m2).f16",
        f"mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16 {{r7, r8}}, {R4}, {R2}, {{r9, r10}};",
    ),
    Probe(
        "mma_fp8_k16",
        "mma",
        "mma.sync.aligned.m16n8k16.row.col.(f16|f32).(e4m3|e5m2).(e4m3|e5m2).(f16|f32)",
        f"mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32 {F4}, {{r1, r2}}, {{r5}}, {F4C};",
    ),
    Probe(
        "mma_sp_fp8",
        "mma",
        "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.*.(e4m3|e5m2).(e4m3|e5m2).*",
        f"mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32 {F4}, {R4}, {{r5, r6, r7, r8}},"
        f" {F4C}, r9, 0x0;",
    ),
    Probe(
        "mma_kind_f8f6f4_fp8",
        "mma",
        "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.*.(e4m3|e5m2).(e4m3|e5m2).*",
        f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32 {F4}, {R4}, {R2}, {F4C};",
    ),
    Probe(
        "mma_kind_f8f6f4_fp4",
        "mma",
        "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.*.e2m1.e2m1.*",
        f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32 {F4}, {R4}, {R2}, {F4C};",
    ),
    Probe(
        "mma_kind_f8f6f4_fp6",
        "mma",
        "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.*.(e2m3|e3m2).(e2m3|e3m2).*",
        f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32 {F4}, {R4}, {R2}, {F4C};",
    ),
    Probe(
        "mma_kind_mxf8f6f4_block_scale",
        "mma",
        "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.*",
        f"mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0"
        f" {F4}, {R4}, {R2}, {F4C}, {SCALES};",
    ),
    Probe(
        "mma_kind_mxf4_block_scale",
        "mma",
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.*",
        f"mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
        f" {F4}, {R4}, {R2}, {F4C}, {SCALES};",
    ),
    Probe(
        "mma_kind_mxf4nvf4_scale_vec_2x",
        "mma",
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.*",
        f"mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
        f" {F4}, {R4}, {R2}, {F4C}, {SCALES};",
    ),
    Probe(
        "mma_kind_mxf4nvf4_scale_vec_4x",
        "mma",
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.*",
        f"mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
        f" {F4}, {R4}, {R2}, {F4C}, {SCALES};",
    ),
    # wgmma (Hopper warpgroup MMA).
    Probe("wgmma_fence", "wgmma", "wgmma.fence.*", "wgmma.fence.sync.aligned;"),
    Probe("wgmma_commit_group", "wgmma", "wgmma.commit_group.*", "wgmma.commit_group.sync.aligned;"),
    Probe("wgmma_wait_group", "wgmma", "wgmma.wait_group.*", "wgmma.wait_group.sync.aligned 0;"),
    Probe(
        "wgmma_f16",
        "wgmma",
        "wgmma.mma_async.sync.aligned.m64n[0-9]+k16.*.(f16|bf16).(f16|bf16)",
        f"wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {F4}, rd1, rd2, p1, 1, 1, 0, 0;",
    ),
    Probe(
        "wgmma_fp8",
        "wgmma",
        "wgmma.mma_async.sync.aligned.m64n[0-9]+k32.*.(e4m3|e5m2).(e4m3|e5m2)",
        f"wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {F4}, rd1, rd2, p1, 1, 1;",
    ),
    Probe(
        "wgmma_s8",
        "wgmma",
        "wgmma.mma_async.sync.aligned.m64n[0-9]+k32.s32.(s8|u8).(s8|u8).*",
        "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8 {r1, r2, r3, r4}, rd1, rd2, p1;",
    ),
    Probe(
        "wgmma_sparse_f16",
        "wgmma",
        "wgmma.mma_async.sp.sync.aligned.*",
        f"wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16 {F4}, rd1, rd2, r1, 0, p1, 1, 1, 0, 0;",
    ),
    # tcgen05 (Blackwell datacenter tensor cores and Tensor Memory).
    Probe(
        "tcgen05_alloc_cta_group1",
        "tcgen05",
        "tcgen05.alloc.cta_group::1.*",
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [r1], 32;",
    ),
    Probe(
        "tcgen05_alloc_cta_group2",
        "tcgen05",
        "tcgen05.alloc.cta_group::2.*",
        "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [r1], 32;",
    ),
    Probe("tcgen05_dealloc", "tcgen05", "tcgen05.dealloc.*", "tcgen05.dealloc.cta_group::1.sync.aligned.b32 r2, 32;"),
    Probe(
        "tcgen05_relinquish_alloc_permit",
        "tcgen05",
        "tcgen05.relinquish_alloc_permit.*",
        "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
    ),
    Probe(
        "tcgen05_mma_f16_cta_group1",
        "tcgen05",
        "tcgen05.mma.cta_group::1.kind::f16.*",
        "tcgen05.mma.cta_group::1.kind::f16 [r1], rd1, rd2, r2, p1;",
    ),
    Probe(
        "tcgen05_mma_f16_cta_group2",
        "tcgen05",
        "tcgen05.mma.cta_group::2.kind::f16.*",
        "tcgen05.mma.cta_group::2.kind::f16 [r1], rd1, rd2, r2, p1;",
    ),
    Probe(
        "tcgen05_mma_f16_tmem_a",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::f16.*",
        "tcgen05.mma.cta_group::1.kind::f16 [r1], [r5], rd2, r2, p1;",
    ),
    Probe(
        "tcgen05_mma_tf32",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::tf32.*",
        "tcgen05.mma.cta_group::1.kind::tf32 [r1], rd1, rd2, r2, p1;",
    ),
    Probe(
        "tcgen05_mma_f8f6f4",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::f8f6f4.*",
        "tcgen05.mma.cta_group::1.kind::f8f6f4 [r1], rd1, rd2, r2, p1;",
    ),
    Probe(
        "tcgen05_mma_i8",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::i8.*",
        "tcgen05.mma.cta_group::1.kind::i8 [r1], rd1, rd2, r2, p1;",
    ),
    Probe(
        "tcgen05_mma_mxf8f6f4",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::mxf8f6f4.block_scale.*",
        "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [r1], rd1, rd2, r2, [r3], [r4], p1;",
    ),
    Probe(
        "tcgen05_mma_mxf4",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::mxf4.block_scale.*",
        "tcgen05.mma.cta_group::1.kind::mxf4.block_scale [r1], rd1, rd2, r2, [r3], [r4], p1;",
    ),
    Probe(
        "tcgen05_mma_mxf4nvf4_scale_vec_4x",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::mxf4nvf4.block_scale.scale_vec::4X.*",
        "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [r1], rd1, rd2, r2, [r3], [r4], p1;",
    ),
    Probe(
        "tcgen05_mma_mxf4nvf4_block16",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].kind::mxf4nvf4.block_scale.block16.*",
        "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [r1], rd1, rd2, r2, [r3], [r4], p1;",
    ),
    Probe(
        "tcgen05_mma_ws",
        "tcgen05",
        "tcgen05.mma.ws.cta_group::1.*",
        "tcgen05.mma.ws.cta_group::1.kind::f16 [r1], rd1, rd2, r2, p1;",
    ),
    Probe(
        "tcgen05_mma_sparse",
        "tcgen05",
        "tcgen05.mma.sp.cta_group::[12].*",
        "tcgen05.mma.sp.cta_group::1.kind::f16 [r1], rd1, rd2, [r3], r2, p1;",
    ),
    Probe(
        "tcgen05_commit_cta_group1",
        "tcgen05",
        "tcgen05.commit.cta_group::1.*",
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [r1];",
    ),
    Probe(
        "tcgen05_commit_cta_group2_multicast",
        "tcgen05",
        "tcgen05.commit.cta_group::2.*.multicast::cluster.*",
        "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [r1], h1;",
    ),
    Probe(
        "tcgen05_ld_32x32b",
        "tcgen05",
        "tcgen05.ld.sync.aligned.*",
        "tcgen05.ld.sync.aligned.32x32b.x1.b32 {r5}, [r1];",
    ),
    Probe(
        "tcgen05_ld_16x256b",
        "tcgen05",
        "tcgen05.ld.sync.aligned.16x256b.*",
        "tcgen05.ld.sync.aligned.16x256b.x1.b32 {r5, r6, r7, r8}, [r1];",
    ),
    Probe(
        "tcgen05_ld_red",
        "tcgen05",
        "tcgen05.ld.red.*",
        "tcgen05.ld.red.sync.aligned.32x32b.x2.min.f32 {f5, f6}, f7, [r1];",
    ),
    Probe(
        "tcgen05_st",
        "tcgen05",
        "tcgen05.st.sync.aligned.*",
        "tcgen05.st.sync.aligned.32x32b.x1.b32 [r1], {r5};",
    ),
    Probe(
        "tcgen05_ld_pack_16b",
        "tcgen05",
        "tcgen05.ld.sync.aligned.*.pack::16b.*",
        "tcgen05.ld.sync.aligned.32x32b.x1.pack::16b.b32 {r5}, [r1];",
    ),
    Probe(
        "tcgen05_st_unpack_16b",
        "tcgen05",
        "tcgen05.st.sync.aligned.*.unpack::16b.*",
        "tcgen05.st.sync.aligned.32x32b.x1.unpack::16b.b32 [r1], {r5};",
    ),
    Probe(
        "tcgen05_mma_collector_a",
        "tcgen05",
        "tcgen05.mma.cta_group::[12].*.collector::a::(fill|use|lastuse|discard).*",
        "tcgen05.mma.cta_group::1.kind::f16.collector::a::fill [r1], rd1, rd2, r2, p1;",
    ),
    Probe("tcgen05_wait_ld", "tcgen05", "tcgen05.wait::ld.*", "tcgen05.wait::ld.sync.aligned;"),
    Probe("tcgen05_wait_st", "tcgen05", "tcgen05.wait::st.*", "tcgen05.wait::st.sync.aligned;"),
    Probe("tcgen05_cp", "tcgen05", "tcgen05.cp.cta_group::[12].*", "tcgen05.cp.cta_group::1.128x256b [r1], rd1;"),
    Probe(
        "tcgen05_cp_warpx4",
        "tcgen05",
        "tcgen05.cp.cta_group::[12].32x128b.warpx4.*",
        "tcgen05.cp.cta_group::1.32x128b.warpx4 [r1], rd1;",
    ),
    Probe(
        "tcgen05_cp_decompress_b6",
        "tcgen05",
        "tcgen05.cp.cta_group::[12].*.b8x16.b6x16_p32",
        "tcgen05.cp.cta_group::1.128x256b.b8x16.b6x16_p32 [r1], rd1;",
    ),
    Probe("tcgen05_shift", "tcgen05", "tcgen05.shift.*", "tcgen05.shift.cta_group::1.down [r1];"),
    Probe(
        "tcgen05_fence_before",
        "tcgen05",
        "tcgen05.fence::before_thread_sync",
        "tcgen05.fence::before_thread_sync;",
    ),
    Probe("tcgen05_fence_after", "tcgen05", "tcgen05.fence::after_thread_sync", "tcgen05.fence::after_thread_sync;"),
    # cvt to and from narrow floating-point formats.
    Probe("cvt_f16x2_f32", "cvt", "cvt.rn.*.f16x2.f32", "cvt.rn.f16x2.f32 r5, f1, f2;"),
    Probe("cvt_bf16x2_f32", "cvt", "cvt.rn.*.bf16x2.f32", "cvt.rn.bf16x2.f32 r5, f1, f2;"),
    Probe("cvt_tf32_f32", "cvt", "cvt.rna.*.tf32.f32", "cvt.rna.tf32.f32 r5, f1;"),
    Probe("cvt_fp8x2_f32", "cvt", "cvt.rn.satfinite.*.(e4m3x2|e5m2x2).f32", "cvt.rn.satfinite.e4m3x2.f32 h1, f1, f2;"),
    Probe(
        "cvt_fp8x2_f16x2",
        "cvt",
        "cvt.rn.satfinite.*.(e4m3x2|e5m2x2).f16x2",
        "cvt.rn.satfinite.e5m2x2.f16x2 h1, r1;",
    ),
    Probe("cvt_f16x2_fp8x2", "cvt", "cvt.rn.*.f16x2.(e4m3x2|e5m2x2)", "cvt.rn.f16x2.e4m3x2 r5, h1;"),
    Probe("cvt_e2m1x2_f32", "cvt", "cvt.rn.satfinite.*.e2m1x2.f32", "cvt.rn.satfinite.e2m1x2.f32 b1, f1, f2;"),
    Probe("cvt_f16x2_e2m1x2", "cvt", "cvt.rn.*.f16x2.e2m1x2", "cvt.rn.f16x2.e2m1x2 r5, b1;"),
    Probe(
        "cvt_fp6x2_f32",
        "cvt",
        "cvt.rn.satfinite.*.(e2m3x2|e3m2x2).f32",
        "cvt.rn.satfinite.e2m3x2.f32 h1, f1, f2;",
    ),
    Probe("cvt_f16x2_fp6x2", "cvt", "cvt.rn.*.f16x2.(e2m3x2|e3m2x2)", "cvt.rn.f16x2.e3m2x2 r5, h1;"),
    Probe("cvt_ue8m0x2_f32", "cvt", "cvt.(rz|rp).*.ue8m0x2.f32", "cvt.rz.satfinite.ue8m0x2.f32 h1, f1, f2;"),
    Probe("cvt_bf16x2_ue8m0x2", "cvt", "cvt.rn.bf16x2.ue8m0x2", "cvt.rn.bf16x2.ue8m0x2 r5, h1;"),
    Probe(
        "cvt_rs_e2m1x4_f32",
        "cvt",
        "cvt.rs.*.e2m1x4.f32",
        "cvt.rs.satfinite.e2m1x4.f32 h1, {f1, f2, f3, f4}, r1;",
    ),
    Probe(
        "cvt_rs_fp8x4_f32",
        "cvt",
        "cvt.rs.*.(e4m3x4|e5m2x4).f32",
        "cvt.rs.satfinite.e4m3x4.f32 r5, {f1, f2, f3, f4}, r1;",
    ),
    # Packed f32x2 arithmetic and wide loads/stores.
    Probe("add_f32x2", "f32x2", "add.*.f32x2", "add.rn.f32x2 rd3, rd1, rd2;"),
    Probe("sub_f32x2", "f32x2", "sub.*.f32x2", "sub.rn.f32x2 rd3, rd1, rd2;"),
    Probe("mul_f32x2", "f32x2", "mul.*.f32x2", "mul.rn.f32x2 rd3, rd1, rd2;"),
    Probe("fma_f32x2", "f32x2", "fma.*.f32x2", "fma.rn.f32x2 rd4, rd1, rd2, rd3;"),
    Probe(
        "ld_global_v8_f32",
        "wide-ld-st",
        "ld.global.*.v8.(f32|b32|u32|s32)",
        "ld.global.v8.f32 {f1, f2, f3, f4, f5, f6, f7, f8}, [rd1];",
    ),
    Probe(
        "ld_global_v4_b64",
        "wide-ld-st",
        "ld.global.*.v4.(b64|u64|s64|f64)",
        "ld.global.v4.b64 {rd2, rd3, rd4, rd5}, [rd1];",
    ),
    Probe(
        "st_global_v8_f32",
        "wide-ld-st",
        "st.global.*.v8.(f32|b32|u32|s32)",
        "st.global.v8.f32 [rd1], {f1, f2, f3, f4, f5, f6, f7, f8};",
    ),
    Probe(
        "ld_global_nc_no_allocate_256b",
        "wide-ld-st",
        "ld.global.nc.L1::no_allocate.*.L2::256B.*",
        "ld.global.nc.L1::no_allocate.L2::256B.v4.s32 {r1, r2, r3, r4}, [rd1];",
    ),
    Probe(
        "st_global_no_allocate",
        "wide-ld-st",
        "st.global.L1::no_allocate.*",
        "st.global.L1::no_allocate.v4.s32 [rd1], {r1, r2, r3, r4};",
    ),
    Probe(
        "red_global_v4_f32",
        "wide-ld-st",
        "red.*.global.add.*.v(2|4).f32",
        "red.global.add.v4.f32 [rd1], {f1, f2, f3, f4};",
    ),
]


def spec_regex(spec: str) -> str:
    """Turn a probe spec into a regex over one instruction, anchored at the opcode (see the module docstring)."""
    out = []
    for i, token in enumerate(spec.removesuffix(".*").split(".")):
        if token == "*":
            out.append(r"(?:\.[^\s.]+)*?")
            continue
        frag = token if re.search(r"[\[\](|+?]", token) else re.escape(token)
        out.append(frag if i == 0 else r"\." + frag)
    return "^" + "".join(out) + r"(?:\.[^\s.]+)*(?=[\s;]|$)"


def specificity(spec: str) -> int:
    return sum(token != "*" for token in spec.split("."))


def first_line(text: str, words: tuple[str, ...], target: str) -> str | None:
    """ptxas's first line containing one of ``words``, without file name and line, the target as ``{target}``."""
    for line in text.splitlines():
        if any(w in line for w in words) and "assembly aborted" not in line:
            line = re.sub(r"^ptxas\s+\S+, line \d+; ", "", line.strip())
            line = re.sub(r"'" + re.escape(target) + r"'", "'{target}'", line)
            return re.sub(r"\s+", " ", line)
    return None


def assemble(ptxas: Path, isa: str, target: str, probe: Probe, workdir: Path) -> tuple[bool, str | None]:
    """Run ptxas on one probe; return (accepted, first error or advisory line)."""
    src = workdir / f"{probe.id}.{target}.ptx"
    src.write_text(MODULE.format(isa=isa, target=target, decls=probe.decls, ptx=probe.ptx))
    out = subprocess.run(
        [str(ptxas), "--gpu-name", target, str(src), "-o", os.devnull], capture_output=True, text=True, timeout=120
    )
    src.unlink()
    text = out.stdout + out.stderr
    if out.returncode:
        return False, first_line(text, ("error", "fatal"), target) or text.strip()[:300]
    return True, first_line(text, ("Advisory", "warning"), target)


def grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for target, line in pairs:
        groups.setdefault(line, []).append(target)
    return dict(sorted(groups.items()))


def run_toolkit(version: str, probes: list[Probe], jobs: int) -> tuple[dict, dict[str, dict]]:
    tk = ensure_toolkit(version)
    ptxas, isa, targets = tk / "bin" / "ptxas", ptx_isa(tk), ptxas_targets(tk)
    work = [(p, t) for p in probes for t in targets]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool:
        outcomes = list(pool.map(lambda pt: assemble(ptxas, isa, pt[1], pt[0], Path(tmp)), work))
    results = {}
    for probe in probes:
        rows = [(t, o) for (p, t), o in zip(work, outcomes) if p is probe]
        results[probe.id] = {
            "accepted": [t for t, (ok, _) in rows if ok],
            "errors": grouped([(t, line) for t, (ok, line) in rows if not ok]),
            "advisories": grouped([(t, line) for t, (ok, line) in rows if ok and line]),
        }
    return {"ptx_isa": isa, "targets": targets}, results


def check_probes(probes: list[Probe]) -> None:
    """Fail on probes that cannot be right: duplicate ids or patterns, or a pattern that misses its own PTX."""
    ids = [p.id for p in probes]
    assert len(ids) == len(set(ids)), "duplicate probe ids"
    specs = [p.spec for p in probes]
    assert len(specs) == len(set(specs)), "two probes share a pattern: the evaluator could not tell them apart"
    for p in probes:
        assert re.match(spec_regex(p.spec), p.ptx), f"{p.id}: pattern {spec_regex(p.spec)} misses {p.ptx!r}"


def generate(versions: list[str], probes: list[Probe], jobs: int) -> dict:
    check_probes(probes)
    toolkits, per_toolkit = {}, {}
    for version in sorted(versions, key=version_key):
        toolkits[version], per_toolkit[version] = run_toolkit(version, probes, jobs)
    rows = []
    for p in probes:
        results = {v: per_toolkit[v][p.id] for v in toolkits}
        row = {"id": p.id, "family": p.family, "pattern": spec_regex(p.spec), "specificity": specificity(p.spec)}
        rows.append(row | {"ptx": p.ptx, "results": results})
    return {"_about": ABOUT, "toolkits": toolkits, "probes": rows}


def broken(table: dict) -> list[str]:
    """Probes accepted by no target of any toolkit: their PTX is wrong, so they are not facts."""
    return [
        f"{row['id']}: {next(iter(row['results'].values()))['errors']}"
        for row in table["probes"]
        if not any(r["accepted"] for r in row["results"].values())
    ]


def summary(table: dict) -> str:
    lines = []
    for row in table["probes"]:
        for version, r in row["results"].items():
            errors = "; ".join(f"{msg} [{' '.join(ts)}]" for msg, ts in r["errors"].items())
            lines.append(f"{row['id']:42} {version:9} ok: {' '.join(r['accepted']) or '-'}")
            if errors:
                lines.append(f"{'':52} rejected: {errors[:400]}")
    return "\n".join(lines)


def stale(shipped: dict, table: dict, versions: list[str], whole: bool) -> list[str]:
    """What in the shipped table differs from a fresh run over ``versions`` (``whole``: the run covered everything)."""

    def meta(row: dict) -> dict:
        return {k: v for k, v in row.items() if k != "results"}

    old_rows = {row["id"]: row for row in shipped["probes"]}
    differ = [v for v in versions if shipped["toolkits"].get(v) != table["toolkits"][v]]
    for row in table["probes"]:
        old = old_rows.get(row["id"], {"results": {}})
        if meta(old) != meta(row) or any(old["results"].get(v) != row["results"][v] for v in versions):
            differ.append(row["id"])
    if whole and (set(old_rows) != {row["id"] for row in table["probes"]} or shipped["_about"] != table["_about"]):
        differ.append("probe list or _about")
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped table instead of writing it")
    parser.add_argument("--toolkits", nargs="+", choices=sorted(TOOLKITS, key=version_key), metavar="VERSION")
    parser.add_argument("--probes", nargs="+", metavar="PREFIX", help="only probes whose id starts with one of these")
    parser.add_argument("--print", action="store_true", help="print what ptxas said and write nothing")
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    versions = args.toolkits or list(TOOLKITS)
    probes = [p for p in PROBES if not args.probes or p.id.startswith(tuple(args.probes))]
    table = generate(versions, probes, args.jobs)
    if args.print:
        print(summary(table))
        return 0
    bad = [] if args.toolkits else broken(table)  # a variant may be newer than the toolkits asked for
    if bad:
        print("broken probes (accepted nowhere, fix their PTX):\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    if not args.check:
        if args.toolkits or args.probes:
            parser.error("--toolkits/--probes only with --check or --print: the shipped table covers everything")
        args.out.write_text(dump(table))
        print(f"wrote {args.out} ({len(table['probes'])} probes, {len(table['toolkits'])} toolkits)")
        return 0
    differ = stale(json.loads(args.out.read_text()), table, versions, whole=not (args.toolkits or args.probes))
    for name in differ:
        print(f"{args.out.name}: {name} differs from what ptxas says; regenerate", file=sys.stderr)
    print(f"checked {len(probes)} probes on {len(versions)} toolkits: {'DIFFERS' if differ else 'up to date'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
