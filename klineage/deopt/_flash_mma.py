"""Inline-PTX snippets of flash_fusion's tensor-core kernel: `ldmatrix`, `mma.sync.m16n8k16`,
`cp.async` and the 16-bit pair packing of the weights.

`mma.sync`'s register fragments have a documented lane mapping (WMMA's are opaque), so the
scores, the weights and the output stay in registers across the key loop: the accumulator of two
adjacent 8-key score tiles is, element for element, the A operand of the next product once packed
to 16-bit pairs (lane l holds rows l/4 and l/4 + 8, columns 2(l%4) and 2(l%4) + 1 of each tile).
"""

from __future__ import annotations

_PTX_TYPE = {"__half": "f16", "half": "f16", "__nv_bfloat16": "bf16"}
_AS_BITS = {"__half": "__half_as_ushort", "half": "__half_as_ushort", "__nv_bfloat16": "__bfloat16_as_ushort"}


def smem_addr(ptr: str) -> str:
    return f"(unsigned)__cvta_generic_to_shared({ptr})"


def ldmatrix_x4(regs: tuple[str, str, str, str], ptr: str, trans: bool = False) -> str:
    """Four 8x8 16-bit matrices into `regs`; lanes 8j..8j+7 give the row addresses of matrix j."""
    t = ".trans" if trans else ""
    outs = ", ".join(f'"=r"({r})' for r in regs)
    return (
        f'asm volatile("ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16 {{%0, %1, %2, %3}}, [%4];\\n" '
        f': {outs} : "r"({smem_addr(ptr)}));'
    )


def mma(elem: str, c: str, a: tuple[str, str, str, str], b: tuple[str, str]) -> str:
    """`c[0..3] += A (16x16) * B (16x8)` in fp32, A and B 16-bit pairs of type `elem`."""
    ty = _PTX_TYPE[elem]
    cs = ", ".join(f'"+f"({c}[{i}])' for i in range(4))
    ins = ", ".join(f'"r"({r})' for r in (*a, *b))
    return (
        f'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 {{%0, %1, %2, %3}}, '
        f'{{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n" : {cs} : {ins});'
    )


def cp_async16(dst: str, src: str) -> str:
    """One 16-byte asynchronous copy from global `src` to shared `dst` (lands at the wait)."""
    return (
        f'asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"({smem_addr(dst)}), "l"({src}));'
    )


COMMIT = 'asm volatile("cp.async.commit_group;\\n" ::);'


def wait(groups: int) -> str:
    """Wait until at most `groups` of this thread's committed copy groups are in flight."""
    return f'asm volatile("cp.async.wait_group {groups};\\n" ::: "memory");'


def pack(elem: str, convert: str, lo: str, hi: str) -> str:
    """Two floats as one register of 16-bit elements (`lo` in the low half: the lower column)."""
    bits = _AS_BITS[elem]
    return f"((unsigned){bits}({convert}({lo})) | ((unsigned){bits}({convert}({hi})) << 16))"
