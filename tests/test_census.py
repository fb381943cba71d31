"""The census's memory hand-back: freed heap pages go back to the system (the shards' RSS creep, fixed)."""

import gc
import sys

import numpy as np
import psutil
import pytest

from bilevel_tune.inner.census import return_free_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim: Linux only")
def test_freed_fragmented_heap_goes_back_to_the_system():
    process = psutil.Process()
    blocks = [np.ones(1000) for _ in range(40_000)]  # 8 KB each, ~320 MB from the heap
    survivors = blocks[::64]  # one in 64 kept: the freed pages lie between them, so free() alone keeps them
    del blocks
    gc.collect()
    held = process.memory_info().rss
    assert return_free_memory() is True
    returned = held - process.memory_info().rss
    assert returned > 200 * 2**20, f"only {returned / 2**20:.0f} MB of ~315 MB freed went back"
    assert len(survivors) == 625
