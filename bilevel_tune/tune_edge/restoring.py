"""A resumed trial restores from its newest checkpoint when the one Tune's saved state names is gone.

Tune keeps a trial's two newest checkpoints (`CheckpointConfig(num_to_keep=2)`) and deletes the older one the
moment a new one arrives; it saves the experiment's state (which names each trial's latest checkpoint) every
10 s, and at once after every second checkpoint of a trial — but only after the deletion. A session killed in
between (SIGKILL, a lost machine) leaves a state naming a checkpoint that is no longer there, while newer ones
are; Tune's restore then fails the trial on every retry ("Could not recover from checkpoint as it does not exist
on storage anymore"). Seen once in a test whose generations take 20 ms; with APPO's seconds per generation the
window is rarer, not closed.

`restorable` gives Tune the trial function as its own class, whose `restore` takes the trial's newest complete
checkpoint (one that holds a `markers` file) in that case, and says so in one line. Its generations follow on from
there: the trial's records keep one line per generation, so nothing is lost or counted twice.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable

import pyarrow.fs as pafs
from ray import tune
from ray.tune.trainable import wrap_function

logger = logging.getLogger(__name__)
CHECKPOINT_DIR = re.compile(r"^checkpoint_(\d+)$")


def restorable(trial_function: Callable, markers: tuple[str, ...]) -> type:
    """Tune's trainable class for `trial_function` (its name kept: a run made before resumes with it)."""

    class RestoringTrial(wrap_function(trial_function)):
        def restore(self, checkpoint_path: Any) -> None:
            return super().restore(newest_if_gone(checkpoint_path, markers))

    return RestoringTrial


def newest_if_gone(restoring: Any, markers: str | tuple[str, ...]) -> Any:
    """`restoring` (a checkpoint, or Tune's result holding one) as it is while its checkpoint exists; else the
    same with the newest later checkpoint beside it that holds one of `markers`; unchanged when there is none."""
    markers = (markers,) if isinstance(markers, str) else markers
    checkpoint = getattr(restoring, "checkpoint", restoring)
    if not isinstance(checkpoint, tune.Checkpoint) or _exists(checkpoint.filesystem, checkpoint.path):
        return restoring
    fs, gone = checkpoint.filesystem, checkpoint.path
    parent, name = gone.rstrip("/").rsplit("/", 1)
    match = CHECKPOINT_DIR.match(name)
    if match is None:
        return restoring
    after = int(match[1])
    later = max(
        (
            (int(m[1]), info.path)
            for info in fs.get_file_info(pafs.FileSelector(parent, allow_not_found=True))
            if info.type == pafs.FileType.Directory and (m := CHECKPOINT_DIR.match(info.base_name))
            and int(m[1]) > after and any(_exists(fs, f"{info.path}/{marker}") for marker in markers)
        ),
        default=None,
    )  # fmt: skip
    if later is None:
        return restoring
    newest = tune.Checkpoint(later[1], filesystem=fs)
    logger.warning(
        "%s was deleted after the last session saved its state (it ended mid-rotation): restoring from %s, "
        "nothing lost",
        name,
        newest.path.rsplit("/", 1)[-1],
    )
    if checkpoint is restoring:
        return newest
    return type(restoring)(checkpoint=newest, metrics=getattr(restoring, "metrics", {}))


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound
