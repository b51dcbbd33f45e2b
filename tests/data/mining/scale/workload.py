"""y = 2 * x + 1 over a float32 vector: a tiny workload for mining tests."""

from klineage import Scalar, Tensor, Workload

WORKLOAD = Workload(
    name="scale_test",
    args=[Tensor("x", ("n",)), Tensor("y", ("n",), role="out"), Scalar("n")],
    reference=lambda x, n: 2 * x + 1,
    shapes={"test": [{"n": 1}, {"n": 300}, {"n": 1027}]},
)
