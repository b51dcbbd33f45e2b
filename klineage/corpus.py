"""The bundled expert corpus (expert_kernels/): which workloads it holds and in which family.
One list for the benchmarks and the tests, in table order; tests/test_corpus_workloads.py checks
it names every folder of the corpus and nothing else."""

from __future__ import annotations

from pathlib import Path

from klineage.paths import repo_root

#: memory-bound workloads (issue 6): judged by bandwidth
MEMORY_BOUND = (
    "reduce_sum",
    "reduce_sum_rows",
    "softmax",
    "softmax_fp16",
    "layernorm",
    "layernorm_bf16",
    "rmsnorm",
    "transpose",
    "transpose_batched",
    "topk",
    # second lineages of the structural skills (issue 24): grid reduction, a warp or a block per
    # row, online softmax, vectorized rows, a padded shared-memory transpose of another shape
    "dot",
    "row_max",
    "log_softmax",
    "permute_nhwc",
    # scattered atomics into a small table, privatized per block (issue 24)
    "class_weight_share",
    "group_mean",
)
#: compute-bound workloads (issue 10): judged in TFLOP/s at every bench shape
COMPUTE_BOUND = (
    "sgemm",
    "gemm_bf16",
    "attention_fwd",
    "linear_relu_bf16",
    "attention_gqa",
)


def corpus_dir() -> Path:
    return repo_root() / "expert_kernels"
