"""Random thread-per-row kernels for the row-layout operators' property tests (warp_per_row,
block_per_row): loops over a row carrying 0-3 reductions each, and a per-row store."""

from __future__ import annotations

from hypothesis import strategies as st

#: reduction kind -> (declaration, update in the loop) with {v} the variable and {c} a constant
UPDATES = {
    "sum": ("float {v} = 0.0f;", "{v} += x[base + j] * {c};"),
    "fma": ("float {v} = 0.0f;", "{v} = fmaf(x[base + j], {c}, {v});"),
    "max": ("float {v} = -INFINITY;", "{v} = fmaxf({v}, x[base + j] - {c});"),
    "min": ("float {v} = INFINITY;", "{v} = fminf(x[base + j] + {c}, {v});"),
}

#: per loop, the kinds of the reductions it carries
LOOP_MIXES = st.lists(
    st.lists(st.sampled_from(sorted(UPDATES)), min_size=0, max_size=3), min_size=1, max_size=3
)


def row_kernel_body(loops: list[list[str]]) -> tuple[str, int]:
    """The body lines after `base` is declared, and how many reductions they carry. A loop
    without a reduction writes elements; the per-row store adds every reduction up."""
    body, n = [], 0
    for li, kinds in enumerate(loops):
        decls, ups = [], []
        for kind in kinds:
            v = f"r{n}"
            n += 1
            d, u = UPDATES[kind]
            decls.append("    " + d.format(v=v))
            ups.append(u.format(v=v, c=f"{li + 1}.0f"))
        if not ups:
            ups = [f"y[base + j] = x[base + j] * {li}.5f;"]
        body += decls + ["    for (int j = 0; j < N; ++j) { " + " ".join(ups) + " }"]
    body.append("    y[row] = " + (" + ".join(f"r{i}" for i in range(n)) or "0.f") + ";")
    return "\n".join(body), n
