"""The census: freed heap pages go back to the system (the shards' RSS creep, fixed); what resident memory is."""

import dataclasses
import gc
import sys

import numpy as np
import psutil
import pytest

from bilevel_tune.core import metrics
from bilevel_tune.inner.census import Census, return_free_memory, take_census


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status: Linux only")
def test_the_census_tells_what_the_resident_memory_is():
    before = take_census()
    held = np.ones(64 * 2**20 // 8)  # 64 MB of the process's own anonymous pages, touched
    after = take_census()
    assert 0 < before.rss_anon_mb < before.rss_mb and 0 <= before.rss_shmem_mb < before.rss_mb
    assert after.rss_anon_mb - before.rss_anon_mb == pytest.approx(64, abs=8)
    assert after.rss_anon_mb + after.rss_shmem_mb <= after.rss_mb + 1  # the rest: files (libraries)
    assert held.sum() == held.size
    trial = Census.total([after, after])
    assert (trial.rss_anon_mb, trial.rss_shmem_mb) == (2 * after.rss_anon_mb, 2 * after.rss_shmem_mb)
    elsewhere = dataclasses.replace(after, rss_anon_mb=-1.0, rss_shmem_mb=-1.0)  # a shard on another OS
    assert (Census.total([after, elsewhere]).rss_anon_mb, Census.total([after, elsewhere]).rss_shmem_mb) == (-1, -1)
    assert {metrics.RSS_ANON_MB, metrics.RSS_SHMEM_MB} <= set(after.as_metrics())
