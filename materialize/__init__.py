"""Materializer: apply a skill curriculum to a new kernel under the gate."""
