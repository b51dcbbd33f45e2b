"""The anthropic SDK is imported only by a command that calls a model: the offline materializer and
`klineage heldout` run on a machine without it (the GPU machine carries no SDK)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_providers_and_models_load_without_the_sdk() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["anthropic"] = None  # any `import anthropic` now raises ModuleNotFoundError
        from klineage.materialize.providers.base import make_provider, provider_names
        names = provider_names()
        assert "anthropic" in names and "offline" in names, names
        make_provider("offline")
        from klineage.materialize.prompts import fit_prompt  # the prompt budget needs no SDK
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("ok")


def test_the_anthropic_provider_still_reaches_the_sdk() -> None:
    from klineage.llm import anthropic_provider

    sdk = anthropic_provider._sdk()
    assert sdk.__name__ == "anthropic" and hasattr(sdk, "Anthropic")
