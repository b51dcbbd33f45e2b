"""Finding the kernel in a model's reply: the last fenced ```cuda block that holds a launcher."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z+]*)[^\n]*\n(.*?)```", re.S)
_OPEN_CUDA = re.compile(r"```[ \t]*(cuda|cu|c\+\+|cpp)\b", re.I)
_CUDA_TAGS = {"cuda", "cu", "c++", "cpp"}


class NoKernel(Exception):
    """The reply holds no usable kernel; the message says what was missing."""


def extract_kernel(reply: str) -> str:
    """The code of the last ```cuda block (cu/cpp/c++ tags accepted) that defines `launch`."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(reply)]
    cuda = [body for tag, body in blocks if tag in _CUDA_TAGS]
    if not cuda:
        if _OPEN_CUDA.search(reply):
            raise NoKernel("the ```cuda block is not closed (reply cut off? raise max_tokens)")
        tags = sorted({t or "untagged" for t, _ in blocks})
        found = f" (found only {', '.join(tags)} blocks)" if blocks else ""
        raise NoKernel(f"the reply has no ```cuda code block{found}")
    with_launch = [b for b in cuda if re.search(r"\blaunch\s*\(", b)]
    if not with_launch:
        raise NoKernel('the ```cuda block has no extern "C" launch(...) launcher: return the whole file')
    return with_launch[-1].rstrip() + "\n"
