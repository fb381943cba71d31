"""Tune's W&B callback, one run per trial, with the runs a study's end leaves open ended, and kept in its run folder."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from ray.air.integrations.wandb import WandbLoggerCallback

from bilevel_tune.runtime.ray_compat import end_wandb_runs_still_open

logger = logging.getLogger(__name__)
WANDB_DIR = "wandb"  # where a trial's W&B runs live, inside its folder


class WandbRunsCallback(WandbLoggerCallback):
    """`WandbLoggerCallback`, which at the experiment's end ends the W&B runs still open and keeps what they wrote.

    Tune tells a trial's W&B logging actor to end its run only when the trial completes or fails. A study
    stopped by Ctrl-C leaves its running trials neither: their actors never hear it, the experiment's end
    waits the whole upload timeout for them and then kills them with what their runs had not yet written
    (Ray 2.53–2.60). Told to end, each finishes its run as a completed trial's does. And the experiment's
    end comes after Tune's last copy of the trials' folders into the run folder: what a run wrote since
    (its end, at least) is copied there too, or it would stay in Ray's session folder.
    """

    def on_experiment_end(self, trials, **info):
        still_open = end_wandb_runs_still_open(self)
        super().on_experiment_end(trials, **info)  # waits for their runs to end
        for trial in still_open:
            keep_in_run_folder(trial)


def keep_in_run_folder(trial) -> None:
    """Copy the trial's W&B files from where its logging actor wrote them (Ray's session folder) to the run folder.

    Files only: links (W&B's `latest-run`) Tune's own copy already made. A copy that fails is one warning line
    naming where the files stay; the study goes on to its end.
    """
    written, kept = Path(trial.local_path) / WANDB_DIR, Path(trial.path) / WANDB_DIR
    if not written.is_dir() or written.resolve() == kept.resolve():
        return
    try:
        for path in written.rglob("*"):
            if path.is_file() and not path.is_symlink():
                target = kept / path.relative_to(written)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    except OSError as err:
        logger.warning("W&B's last records of trial %s stay in %s: copying them failed (%s)", trial, written, err)
