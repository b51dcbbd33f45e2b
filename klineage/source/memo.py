"""One analysis of a source text, reused: an operator's `find_forward` and the preconditions of
each site it found read the same kernel, and a whole-file analysis (is this a naive GEMM loop, a
transposing copy?) need not run again for each. Keyed by the text (two parses of one text give the
same answer), bounded, shared between threads; cached values must be immutable."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import TypeVar

from klineage.source.model import CudaSource

T = TypeVar("T")


def per_text(maxsize: int = 32) -> Callable[[Callable[[CudaSource], T]], Callable[[CudaSource], T]]:
    """Decorator: `fn(src)` computed once per distinct `src.text` among the last `maxsize` texts."""

    def wrap(fn: Callable[[CudaSource], T]) -> Callable[[CudaSource], T]:
        cache: OrderedDict[str, T] = OrderedDict()
        lock = threading.Lock()

        @wraps(fn)
        def cached(src: CudaSource) -> T:
            with lock:
                if src.text in cache:
                    cache.move_to_end(src.text)
                    return cache[src.text]
            # outside the lock: an analysis may take a while, and two threads may race harmlessly
            value = fn(src)
            with lock:
                cache[src.text] = value
                while len(cache) > maxsize:
                    cache.popitem(last=False)
            return value

        return cached

    return wrap
