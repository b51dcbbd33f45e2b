"""The one place operators are registered, in the soft removal order of DESIGN.md."""

from __future__ import annotations

from klineage.deopt.base import Operator
from klineage.deopt.block_atomic import BlockAtomic
from klineage.deopt.block_per_row import BlockPerRow
from klineage.deopt.block_row_of_warps import BlockRowOfWarps
from klineage.deopt.block_swizzle import BlockSwizzle
from klineage.deopt.cg_reduce import CgReduce
from klineage.deopt.coalesced_mapping import CoalescedMapping
from klineage.deopt.coarsening import Coarsening
from klineage.deopt.deep_micro_tile import DeepMicroTile
from klineage.deopt.epilogue_staging import EpilogueStaging
from klineage.deopt.fast_math import FastMath
from klineage.deopt.flash_fusion import FlashFusion
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.grid_reduce import GridReduce
from klineage.deopt.grid_stride import GridStride
from klineage.deopt.launch_bounds import LaunchBounds
from klineage.deopt.ldg import Ldg
from klineage.deopt.load_add import LoadAdd
from klineage.deopt.one_pass_variance import OnePassVariance
from klineage.deopt.online_softmax import OnlineSoftmax
from klineage.deopt.packed_half2 import PackedHalf2
from klineage.deopt.pipeline import Pipeline
from klineage.deopt.pragma_unroll import PragmaUnroll
from klineage.deopt.privatized_atomics import PrivatizedAtomics
from klineage.deopt.reciprocal_hoist import ReciprocalHoist
from klineage.deopt.register_blocking import RegisterBlocking
from klineage.deopt.restrict import Restrict
from klineage.deopt.row_stats import RowStats
from klineage.deopt.setmaxnreg import SetMaxNReg
from klineage.deopt.size_dispatch import SizeDispatch
from klineage.deopt.smem_padding import SmemPadding
from klineage.deopt.smem_staging import SmemStaging
from klineage.deopt.smem_transpose import SmemTranspose
from klineage.deopt.tensor_core import TensorCore
from klineage.deopt.tile_size import TileSize
from klineage.deopt.tiled_online_softmax import TiledOnlineSoftmax
from klineage.deopt.tma import Tma
from klineage.deopt.tree_addressing import TreeAddressing
from klineage.deopt.tree_compaction import TreeCompaction
from klineage.deopt.two_level_reduce import TwoLevelReduce
from klineage.deopt.unrolled_tree import UnrolledTree
from klineage.deopt.vectorize import Vectorize
from klineage.deopt.warp_per_row import WarpPerRow
from klineage.deopt.warp_shuffle_reduce import WarpShuffleReduce
from klineage.deopt.wgmma import Wgmma
from klineage.errors import KLineageError

#: Every rule operator, one instance each. Add new operators here (and nowhere else).
_OPERATORS: list[Operator] = [
    LaunchBounds(),
    SetMaxNReg(),
    PragmaUnroll(),
    Restrict(),
    TileSize(),
    BlockSwizzle(),
    UnrolledTree(),  # template
    Pipeline(),  # pipeline
    Tma(),  # async_copy
    Ldg(),  # specialized_instruction
    Wgmma(),
    FastMath(),
    ReciprocalHoist(),
    WarpShuffleReduce(),
    CgReduce(),
    SmemPadding(),  # smem_layout
    SmemTranspose(),
    TreeAddressing(),
    TreeCompaction(),
    TwoLevelReduce(),
    SmemStaging(),  # staging
    EpilogueStaging(),
    PrivatizedAtomics(),
    Vectorize(),  # vectorization
    PackedHalf2(),
    TensorCore(),  # matrix_instruction
    BlockAtomic(),  # fusion
    OnlineSoftmax(),
    TiledOnlineSoftmax(),
    FlashFusion(),
    OnePassVariance(),
    GridStride(),  # tiling
    Coarsening(),
    GemmTiling(),
    DeepMicroTile(),
    LoadAdd(),
    RegisterBlocking(),
    WarpPerRow(),
    BlockRowOfWarps(),  # before block_per_row: a block of warps goes to a warp per row first
    BlockPerRow(),
    RowStats(),  # after the row layouts: a thread per row is what they start from
    CoalescedMapping(),
    SizeDispatch(),
    GridReduce(),  # after size_dispatch: the step closest to the naive kernel
]


def operators() -> list[Operator]:
    """All rule operators, sorted by the soft removal prior (stable within a category)."""
    return sorted(_OPERATORS, key=lambda op: op.rank)


def get_operator(name: str) -> Operator:
    for op in _OPERATORS:
        if op.name == name:
            return op
    raise KLineageError(f"unknown operator '{name}' (known: {', '.join(o.name for o in operators())})")
