"""Trackers: W&B (driver-side Tune callback) and Tune's CSV/JSON files, with the W&B key never passed as an argument.

Tune pickles its callbacks into the run folder, so the W&B key is never
given to the callback: it comes from WANDB_API_KEY, a git-ignored
`.wandb.env`, or `wandb login`'s ~/.netrc entry, all checked without a
network call. Each trial is one W&B run whose id is the trial's, so a
resumed trial continues its own run; at the end the summary — tables,
verdicts, plots — is one more run of the group. Every wait on W&B is
bounded: an unreachable server costs seconds, not Tune's default 30 minutes.
TensorBoard's curves are `curves`' (written by `experiment.TrialCurves`), so
Tune's own TensorBoard logger, with its `ray/tune/…` names, is turned off.
"""

from __future__ import annotations

import netrc
import os
from pathlib import Path
from typing import Sequence
from urllib.parse import urlparse

from bilevel_tune.study_data.run_folder import PLOTS_DIR, VERDICTS_FILE

WANDB_PROJECT = "bilevel"
WANDB_MODES = ("auto", "online", "offline", "disabled")
KEY_ENV = "WANDB_API_KEY"
KEY_FILES = (".wandb.env",)
DEFAULT_HOST = "api.wandb.ai"
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


def netrc_has_key() -> bool:
    """Did `wandb login` leave a key for this W&B host in ~/.netrc (or $NETRC)?"""
    host = urlparse(os.environ.get("WANDB_BASE_URL", f"https://{DEFAULT_HOST}")).hostname or DEFAULT_HOST
    path = os.environ.get("NETRC") or str(Path.home() / ".netrc")
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])


def resolve_wandb_mode(requested: str, key_dirs=None) -> str:
    """auto → online with credentials, else offline; online without credentials is an error."""
    if requested not in WANDB_MODES:
        raise TrackingError(f"--wandb={requested!r} is unknown; allowed: {', '.join(WANDB_MODES)}")
    if requested == "disabled":
        return requested
    has_key = load_key_file(key_dirs) or netrc_has_key()
    if requested == "auto":
        return "online" if has_key else "offline"
    if requested == "online" and not has_key:
        raise TrackingError(
            f"--wandb online needs credentials: `wandb login`, {KEY_ENV} in the environment, "
            f"or {KEY_ENV}=... in .wandb.env (never on the command line)"
        )
    return requested


def callbacks(mode: str, group: str, tags: Sequence[str] = ()) -> list:
    """Tune callbacks for this mode: W&B unless disabled; CSV and JSON files always."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"  # else Tune adds its TensorBoard logger back
    found = [JsonLoggerCallback(), CSVLoggerCallback()]
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_INIT_TIMEOUT", str(INIT_TIMEOUT_S))
    os.environ.setdefault("WANDB_SILENT", "true")
    if mode == "disabled":
        return found
    from bilevel_tune.tune_edge.wandb_runs import WandbRunsCallback

    # W&B logs from actors on the cluster, which need not share the driver's environment:
    # the settings travel with the callback. The key does not — Tune pickles callbacks into the
    # run folder — Ray hands it to the logging actors from the driver's environment (or W&B reads netrc).
    return [
        WandbRunsCallback(
            project=WANDB_PROJECT,
            group=group,
            upload_timeout=UPLOAD_TIMEOUT_S,
            mode=mode,
            settings=_settings(),
            resume="allow",  # the run id is the trial id: a resumed trial continues its own run
            tags=list(tags),
        ),
        *found,
    ]


def _settings() -> dict:
    settings = {"init_timeout": INIT_TIMEOUT_S, "silent": True, "console": "off"}
    if os.environ.get("WANDB_BASE_URL"):
        settings["base_url"] = os.environ["WANDB_BASE_URL"]
    return settings


def sync_command(run_dir: Path) -> str:
    """Uploads every W&B run of this study that is not on the server: offline runs, and online ones that failed."""
    return f"wandb sync {run_dir}/wandb/*run-* {run_dir}/*/wandb/*run-*"


def _keep_media_folder() -> None:
    """W&B stages images and tables in one temporary folder made when it is first imported. Imported first
    during an earlier run in this process (a notebook's second study, a test session), that folder was the
    earlier run's scratch, removed at its end (runtime.lifecycle.Scratch): make it again."""
    from wandb.sdk.data_types import _private

    Path(_private.MEDIA_TMP.name).mkdir(parents=True, exist_ok=True)


def log_summary(run_dir: Path, mode: str, group: str, tags: Sequence[str] = (), tables: Sequence[str] = ()) -> str | None:
    """The summary's tables (`tables`: its CSV files, in its sections' order), verdicts and plots as one more run of
    the group; a line when it could not."""
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
            tags=list(tags),
            dir=str(run_dir),
            mode=mode,
            settings=wandb.Settings(**_settings()),
        )
        _keep_media_folder()
        for png in sorted(Path(run_dir, PLOTS_DIR).glob("*.png")):
            run.log({f"summary/{png.stem}": wandb.Image(str(png))})
        for name in tables:
            csv = Path(run_dir, name)
            if csv.is_file() and csv.stat().st_size > 1:
                run.log({f"summary/{csv.stem}": wandb.Table(dataframe=pd.read_csv(csv))})
        run.summary["verdicts"] = Path(run_dir, VERDICTS_FILE).read_text()
        run.finish()
        return None
    except Exception as err:  # noqa: BLE001 - tracking must never cost the study its results
        return f"W&B summary skipped ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
