"""Trackers: W&B (driver-side Tune callback) and TensorBoard, with the key never passed as an argument.

Tune pickles its callbacks into the experiment folder, so the W&B key is
read into the environment (from WANDB_API_KEY or a git-ignored `.wandb.env`)
and never given to the callback. Every wait on W&B is bounded: no hang at
the end of an interrupted study when its server cannot be reached.
"""

from __future__ import annotations

import os
from pathlib import Path

WANDB_PROJECT = "bilevel"
WANDB_MODES = ("auto", "online", "offline", "disabled")
KEY_ENV = "WANDB_API_KEY"
KEY_FILES = (".wandb.env",)
UPLOAD_TIMEOUT_S = 30  # Tune's default is 1800 s
INIT_TIMEOUT_S = 30


class TrackingError(ValueError):
    pass


def load_key_file(directories=None) -> bool:
    """Read WANDB_API_KEY from a `.wandb.env` (KEY=VALUE lines) into the environment, if not already set."""
    if os.environ.get(KEY_ENV):
        return True
    for directory in directories or (Path.cwd(),):
        for name in KEY_FILES:
            path = Path(directory) / name
            if not path.is_file():
                continue
            for line in path.read_text().splitlines():
                key, sep, value = line.strip().removeprefix("export ").partition("=")
                if sep and key.strip() == KEY_ENV and value.strip():
                    os.environ[KEY_ENV] = value.strip().strip("'\"")
                    return True
    return False


def resolve_wandb_mode(requested: str, key_dirs=None) -> str:
    """auto → online with a key, else offline; online without a key is an error."""
    if requested not in WANDB_MODES:
        raise TrackingError(f"--wandb={requested!r} is unknown; allowed: {', '.join(WANDB_MODES)}")
    has_key = load_key_file(key_dirs) if requested != "disabled" else False
    if requested == "auto":
        return "online" if has_key else "offline"
    if requested == "online" and not has_key:
        raise TrackingError(
            f"--wandb online needs an API key: set {KEY_ENV} or put {KEY_ENV}=... in .wandb.env (never on the command line)"
        )
    return requested


def callbacks(mode: str, group: str) -> list:
    """Tune callbacks for this mode: W&B unless disabled; TensorBoard files always."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

    found = [JsonLoggerCallback(), CSVLoggerCallback(), TBXLoggerCallback()]
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_INIT_TIMEOUT", str(INIT_TIMEOUT_S))
    os.environ.setdefault("WANDB_SILENT", "true")
    if mode == "disabled":
        return found
    from ray.air.integrations.wandb import WandbLoggerCallback

    # W&B logs from actors on the cluster, which need not share the driver's environment:
    # the settings travel with the callback. The key does not — Tune pickles callbacks into the
    # run folder — Ray hands it to the logging actors from the driver's environment.
    settings = {"init_timeout": INIT_TIMEOUT_S, "silent": True, "console": "off"}
    if os.environ.get("WANDB_BASE_URL"):
        settings["base_url"] = os.environ["WANDB_BASE_URL"]
    return [
        WandbLoggerCallback(
            project=WANDB_PROJECT, group=group, upload_timeout=UPLOAD_TIMEOUT_S, mode=mode, settings=settings
        ),
        *found,
    ]


def log_summary(run_dir: Path, mode: str, group: str) -> str | None:
    """Send the summary's plots and tables to W&B as one more run of the group; never fails the study."""
    if mode == "disabled":
        return None
    try:
        import pandas as pd
        import wandb

        run = wandb.init(
            project=WANDB_PROJECT,
            group=group,
            name=f"{group}-summary",
            job_type="summary",
            dir=str(run_dir),
            mode=mode,
            settings=wandb.Settings(init_timeout=INIT_TIMEOUT_S, silent=True, console="off"),
        )
        for png in sorted(Path(run_dir, "plots").glob("*.png")):
            run.log({f"summary/{png.stem}": wandb.Image(str(png))})
        for name in ("grid", "trials", "cells"):
            csv = Path(run_dir, f"{name}.csv")
            if csv.is_file() and csv.stat().st_size > 1:
                run.log({f"summary/{name}": wandb.Table(dataframe=pd.read_csv(csv))})
        run.summary["verdicts"] = Path(run_dir, "verdicts.json").read_text()
        run.finish()
        return None
    except Exception as err:  # noqa: BLE001 - tracking must never cost the study its results
        return f"W&B summary upload skipped ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
