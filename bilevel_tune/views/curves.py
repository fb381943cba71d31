"""TensorBoard's view of a study: each trial's curves as it runs, the study's summary at its end.

    <run folder>/tensorboard/<trial name>/events.*   one file per session of the trial (step = generation)
    <run folder>/tensorboard/summary/events.*        grid, trials, verdicts (text) and plots (images)

The names say what a curve is, in the words of the summary — `objective/best_so_far`,
`rules/mean/fixed_quota`, `runtime/seconds_per_generation` —, and each carries a
one-line description that TensorBoard shows beside it. Rules are in physical
units. The objective's group sorts first; the population's candidates are two or
three histograms per generation (`population/objective`, `population/<rule>`: the
Distributions tab shows their spread over generations), not one card per candidate,
whose index means nothing from one generation to the next; and a custom-scalars
layout draws the objective's curves in one chart. The event files are written with TensorBoard's own writer, whose flush
waits for every queued event: a curve is on disk when its report returns.
"""

from __future__ import annotations

import numbers
import shutil
import struct
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from bilevel_tune.core import metrics
from bilevel_tune.study_data.run_folder import PLOTS_DIR, TENSORBOARD_DIR

SUMMARY_RUN = "summary"

# (tag, metric, description): the trial's curves, in the order TensorBoard lists their groups
TRIAL_CURVES = (
    ("objective/this_generation", metrics.OBJECTIVE, "the best candidate's objective in this generation"),
    ("objective/best_so_far", metrics.BEST_OBJECTIVE, "the best objective any generation has reached (Tune's metric)"),
    ("objective/population_mean", metrics.OBJECTIVE_MEAN, "the mean objective over this generation's candidates"),
    ("objective/population_std", metrics.OBJECTIVE_STD, "the spread of the candidates' objectives"),
    ("objective/upper_bound", metrics.UPPER_BOUND, "what the best candidate's rules allow at most (the ceiling check)"),
    ("search/sigma", metrics.SIGMA, "the ES step size σ, in the search space's units"),
    ("search/failed_candidates", metrics.FAILED, "candidates whose lake failed this generation"),
    ("runtime/seconds_per_generation", metrics.SEC_PER_GEN, "wall seconds of the whole generation"),
    ("runtime/seconds_training", metrics.SEC_TRAIN, "wall seconds of the K train() calls (slowest shard)"),
    ("runtime/seconds_evaluating", metrics.SEC_EVALUATE, "wall seconds of the evaluation (slowest shard)"),
    ("runtime/shards", metrics.SHARDS, "inner-loop actors (CPUs) this generation ran on"),
    ("runtime/threads", metrics.THREADS_OS, "OS threads of the inner loop's processes: flat when nothing leaks"),
    ("runtime/learner_threads", metrics.LEARNER_THREADS, "live APPO learner threads: one per shard at most"),
    ("runtime/rss_mb", metrics.RSS_MB, "resident memory of the inner loop's processes, MB"),
    ("objective/final_best", metrics.FINAL_BEST, "the best-so-far rules retrained on fresh seeds: what the verdicts use"),
    ("objective/final_mean", metrics.FINAL_MEAN, "the final search mean's rules retrained on fresh seeds"),
)
FINAL_TAGS = ("objective/final_best", "objective/final_mean")  # the last report's: one step after the last generation
RULE_CURVES = (  # (metric prefix, tag prefix, description)
    (metrics.MEAN_RULE, "rules/mean/", "the search mean's value of this rule, physical units"),
    (metrics.BEST_RULE, "rules/best_so_far/", "the best-so-far candidate's value of this rule, physical units"),
)
POPULATION_TAG = "population/{name}"  # a histogram per generation: the candidates' objective, or a searched rule
# The custom-scalars layout: (chart title, tag regex) in one category, the objective's curves together
LAYOUT = (
    ("objective: this generation, best so far, population mean, upper bound", r"objective/(?!population_std|final)"),
    ("rules: the search mean (physical units)", r"rules/mean/.*"),
)


def trial_scalars(result: Mapping[str, Any]) -> Iterator[tuple[str, float, str]]:
    """(tag, value, description) of every curve a Tune report holds; absent and non-numeric values are skipped.

    The trial's last report, after its generations, holds the final re-evaluation: only final/ curves.
    """
    final_report = metrics.GENERATION not in result
    for tag, key, description in TRIAL_CURVES:
        if ((tag in FINAL_TAGS) == final_report) and _is_number(result.get(key)):
            yield tag, float(result[key]), description
    if final_report:
        return
    for key, value in result.items():
        if not _is_number(value):
            continue
        for prefix, tag_prefix, description in RULE_CURVES:
            if key.startswith(prefix):
                yield tag_prefix + key.removeprefix(prefix), float(value), description


def population_histograms(result: Mapping[str, Any]) -> Iterator[tuple[str, list[float], str]]:
    """(tag, values, description): the generation's candidates as one histogram per quantity (failed ones left out)."""
    columns: dict[str, list[float]] = {}
    for key, value in result.items():
        if key.startswith(metrics.CANDIDATE) and _is_number(value) and value == value:  # NaN: a failed lake
            name = key.removeprefix(metrics.CANDIDATE).partition("/")[2]
            columns.setdefault(name, []).append(float(value))
    for name, values in columns.items():
        what = "objectives" if name == metrics.OBJECTIVE else f"values of {name}, physical units"
        yield POPULATION_TAG.format(name=name), values, f"this generation's candidates' {what}"


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class EventWriter:
    """One TensorBoard run: scalars, markdown text and PNG images, each flushed to disk before it returns."""

    def __init__(self, directory: Path):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        directory.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(directory))
        self._described: set[str] = set()  # a description is written with a tag's first point only

    def scalars(self, step: int, values) -> None:
        from tensorboard.plugins.scalar.summary_v2 import scalar_pb

        for tag, value, description in values:
            self._add(step, scalar_pb(tag, value, description=self._describe(tag, description)))
        self._writer.flush()

    def histograms(self, step: int, values) -> None:
        from tensorboard.plugins.histogram.summary_v2 import histogram_pb

        for tag, data, description in values:
            self._add(step, histogram_pb(tag, data, buckets=16, description=self._describe(tag, description)))
        self._writer.flush()

    def layout(self) -> None:
        """The custom-scalars layout (TensorBoard's Custom Scalars tab): the objective's curves in one chart."""
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.plugins.custom_scalar import layout_pb2, metadata
        from tensorboard.util import tensor_util

        charts = [
            layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=[regex]))
            for title, regex in LAYOUT
        ]
        layout = layout_pb2.Layout(category=[layout_pb2.Category(title="study", chart=charts)])
        # the plugin's own `summary.pb` needs TensorFlow; this is the same proto, built without it
        tensor = tensor_util.make_tensor_proto([layout.SerializeToString()], dtype="string", shape=[])
        value = Summary.Value(
            tag=metadata.CONFIG_SUMMARY_TAG, metadata=metadata.create_summary_metadata(), tensor=tensor
        )
        self._add(0, Summary(value=[value]))
        self._writer.flush()

    def text(self, step: int, tag: str, markdown: str) -> None:
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._add(step, text_pb(tag, markdown))
        self._writer.flush()

    def png(self, step: int, tag: str, png: bytes) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        width, height = struct.unpack(">II", png[16:24])  # the PNG header's IHDR chunk
        image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=png)
        self._add(step, Summary(value=[Summary.Value(tag=tag, image=image)]))
        self._writer.flush()

    def session_start(self, step: int) -> None:
        """Mark where this session's points begin: TensorBoard drops an earlier session's points from `step` on.

        A resumed trial replays the generation that was in flight when its last session stopped.
        """
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog

        self._writer.add_event(Event(wall_time=time.time(), step=step, session_log=SessionLog(status=SessionLog.START)))

    def close(self) -> None:
        self._writer.close()

    def _describe(self, tag: str, description: str) -> str | None:
        if tag in self._described:
            return None
        self._described.add(tag)
        return description

    def _add(self, step: int, summary) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self._writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))


class TrialCurveWriters:
    """The event writers of a study's trials, one TensorBoard run per trial name, opened on first use."""

    def __init__(self, run_dir: Path):
        self.root = Path(run_dir) / TENSORBOARD_DIR
        self._writers: dict[str, EventWriter] = {}
        self._last_step: dict[str, int] = {}

    def report(self, trial: str, result: Mapping[str, Any]) -> None:
        """A generation's report at its generation; the final report one step after the last generation."""
        if metrics.GENERATION in result:
            step = int(result[metrics.GENERATION])
        else:
            step = self._last_step.get(trial, -1) + 1
        self._last_step[trial] = step
        if trial not in self._writers:
            self._writers[trial] = EventWriter(self.root / trial)
            self._writers[trial].session_start(step)
            self._writers[trial].layout()
        self._writers[trial].scalars(step, trial_scalars(result))
        self._writers[trial].histograms(step, population_histograms(result))

    def close(self, trial: str | None = None) -> None:
        for name in [trial] if trial else list(self._writers):
            writer = self._writers.pop(name, None)
            if writer:
                writer.close()


def write_summary_board(run_dir: Path, sections: Sequence[tuple[str, Sequence[str]]]) -> Path:
    """The summary as one TensorBoard run, replacing the previous one: each section's markdown as a text, by its
    name (`report.pipeline.SECTIONS`, in their order), the plots as images."""
    run_dir = Path(run_dir)
    folder = run_dir / TENSORBOARD_DIR / SUMMARY_RUN
    shutil.rmtree(folder, ignore_errors=True)
    writer = EventWriter(folder)
    try:
        for name, lines in sections:
            writer.text(0, f"summary/{name}", "\n".join(lines).strip())
        for png in sorted((run_dir / PLOTS_DIR).glob("*.png")):
            writer.png(0, f"plots/{png.stem}", png.read_bytes())
    finally:
        writer.close()
    return folder
