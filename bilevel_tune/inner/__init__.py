"""The inner loop: the contract every loop meets (`contract`), the trial's sharded handle (`shards`),
a policy evaluated through the world (`evaluation`), the census of threads and memory (`census`), and
the numpy stand-in (`analytic`); the real APPO loops are `bilevel_tune.appo`'s.
"""

from bilevel_tune.inner.contract import (
    BUILTIN_LOOPS,
    LOOP_METHODS,
    RESET_PARAMETERS,
    STOP_MODES,
    InnerLoop,
    InnerLoopConfig,
    InnerLoopError,
    InnerLoopStopped,
    candidate_seed,
    check_loop_on_world,
    check_loop_spec,
    load_loop_class,
    loop_path,
)
from bilevel_tune.inner.shards import (
    SHARD_STOP_TIMEOUT_S,
    STOP_POLL_S,
    GenerationResult,
    Shard,
    ShardedInnerLoop,
    ShardReport,
    blocks,
)

__all__ = [
    "BUILTIN_LOOPS", "LOOP_METHODS", "RESET_PARAMETERS", "STOP_MODES", "SHARD_STOP_TIMEOUT_S", "STOP_POLL_S",
    "InnerLoop", "InnerLoopConfig", "InnerLoopError", "InnerLoopStopped", "GenerationResult", "Shard",
    "ShardedInnerLoop", "ShardReport", "blocks", "candidate_seed", "check_loop_on_world", "check_loop_spec", "load_loop_class", "loop_path",
]  # fmt: skip
