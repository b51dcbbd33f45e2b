"""Interop with the field's formats: KernelBench problems and solutions, FlashInfer-Bench definitions."""
