"""The validation gate: parse, compile, run, correctness, profile (DESIGN.md)."""
