"""The Tune edge's callbacks, on stand-in trials: re-planning a resumed session, and stopping when a trial can no longer fit."""

import signal

from ray.tune.experiment import Trial

from bilevel_tune.study_data.definition import load_study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.tune_edge import experiment
from bilevel_tune.tune_edge.trainable import trial_resources


class StandInTrial:
    """What the callbacks read of a Tune trial: status, config, resources, and a way to change them."""

    def __init__(self, cell, status, shards):
        self.config, self.status, self.trial_id = {"cell": cell.as_config()}, status, str(cell.key)
        self.placement_group_factory = trial_resources(shards)
        self.updates = []

    def update_resources(self, resources):
        self.updates.append(resources)
        self.placement_group_factory = resources

    def __str__(self):
        return self.trial_id


def test_replan_gives_every_unfinished_trial_this_sessions_shards_once_before_any_starts():
    cells = compile_design(load_study("weekend")).cells[:3]
    trials = [
        StandInTrial(cells[0], Trial.PENDING, 1),  # planned anew: 2
        StandInTrial(cells[1], Trial.TERMINATED, 1),  # finished: left alone
        StandInTrial(cells[2], Trial.ERROR, 3),  # already as planned
    ]
    replan = experiment.Replan({cells[0].key: 2, cells[1].key: 2, cells[2].key: 3})
    replan.on_step_begin(0, trials)
    assert [len(t.updates) for t in trials] == [1, 0, 0] and trials[0].placement_group_factory == trial_resources(2)
    trials[0].placement_group_factory = trial_resources(1)
    replan.on_step_begin(1, trials)  # only before the first step
    assert len(trials[0].updates) == 1


def test_cluster_watch_stops_the_study_once_a_pending_trial_has_not_fit_for_its_wait(monkeypatch):
    clock, kills = [0.0], []
    monkeypatch.setattr(experiment.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(experiment.os, "kill", lambda pid, sig: kills.append(sig))
    monkeypatch.setattr("bilevel_tune.runtime.cluster.cluster_cpus", lambda: 2)
    cells = compile_design(load_study("weekend")).cells[:2]
    fits, too_big = StandInTrial(cells[0], Trial.PENDING, 1), StandInTrial(cells[1], Trial.PENDING, 3)
    watch = experiment.ClusterWatch(wait_s=20.0)
    for now in (10.0, 20.0, 30.0):  # within the wait: Ray may still be placing it
        clock[0] = now
        watch.on_step_begin(0, [fits, too_big])
    assert watch.reason is None and kills == []
    clock[0] = 10.0 + watch.wait_s + watch.every_s
    watch.on_step_begin(0, [fits, too_big])
    assert kills == [signal.SIGINT] and "needs 3 CPUs but the cluster has 2 left" in watch.reason
    assert "--resume re-plans" in watch.reason


def test_an_interrupted_runs_trials_that_never_reported_are_not_listed_as_fetch_failures(caplog):
    import logging

    never = (
        "Failed to fetch metrics for 2 trial(s):\n"
        "- weekend_pop16_1d_seed7: FileNotFoundError('Could not fetch metrics for weekend_pop16_1d_seed7: both "
        "result.json and progress.csv were not found at /r/weekend_pop16_1d_seed7_a7257_00006')\n"
        "- weekend_scan_1d_seed7: FileNotFoundError('Could not fetch metrics for weekend_scan_1d_seed7: both "
        "result.json and progress.csv were not found at /r/weekend_scan_1d_seed7_a7257_00009')"
    )
    broken = "Failed to fetch metrics for 1 trial(s):\n- weekend_pop1_1d_seed7: ValueError('a corrupt progress.csv')"
    tune_logger = logging.getLogger("ray.tune.analysis.experiment_analysis")
    with caplog.at_level(logging.WARNING, logger=tune_logger.name), experiment.OneLineTrialFailures():
        tune_logger.warning(never)
        tune_logger.warning(broken)
    assert [r.getMessage() for r in caplog.records] == [broken]  # a real failure to read stays


def test_a_checkpoint_deleted_before_a_killed_session_ended_is_one_line_on_resume(caplog):
    """Tune's words when a restored trial's list names a checkpoint the killed session had deleted already."""
    import logging

    controller = logging.getLogger("ray.tune.execution.tune_controller")

    def tune_logs(error: Exception, trial: str) -> None:
        try:
            raise error
        except Exception:
            controller.exception("Trial %s: Error handling checkpoint %s", trial, "TrainingResult(…)")

    gone = FileNotFoundError("Path not found: (<LocalFileSystem>, /r/weekend_pop1_2d_seed1671_1/checkpoint_000341)")
    with caplog.at_level(logging.WARNING, logger=controller.name), experiment.OneLineTrialFailures():
        tune_logs(gone, "weekend_pop1_2d_seed1671")
        tune_logs(ValueError("a corrupt checkpoint"), "weekend_pop1_1d_seed7")
    one_line, other = caplog.records
    assert one_line.getMessage() == f"Trial weekend_pop1_2d_seed1671: {experiment.OneLineTrialFailures.GONE_CHECKPOINT}"
    assert one_line.levelname == "WARNING" and one_line.exc_info is None
    assert other.levelname == "ERROR" and other.exc_info is not None  # any other failure: Tune's own record stays


def test_a_restore_whose_checkpoint_is_gone_takes_the_newest_complete_one_after_it(tmp_path, caplog):
    from ray import tune

    from bilevel_tune.tune_edge.restoring import newest_if_gone
    from bilevel_tune.tune_edge.trainable import LEGACY_STATE_FILES, STATE_FILE, read_state

    markers = (STATE_FILE, *LEGACY_STATE_FILES)
    # 4: written by a release before the optimiser-neutral name; 5: today's; 6: cut short by a kill
    for index, files in ((4, ["es_state.json"]), (5, [STATE_FILE]), (6, [])):
        (tmp_path / f"checkpoint_{index:06d}").mkdir()
        for name in files:
            (tmp_path / f"checkpoint_{index:06d}" / name).write_text("{}")
    named = lambda i: tune.Checkpoint(str(tmp_path / f"checkpoint_{i:06d}"))  # noqa: E731

    assert newest_if_gone(named(4), markers).path == named(4).path, "a checkpoint still there is Tune's"
    with caplog.at_level("WARNING"):
        assert newest_if_gone(named(3), markers).path == named(5).path
    assert "checkpoint_000003 was deleted" in caplog.text and "restoring from checkpoint_000005" in caplog.text
    assert newest_if_gone(named(7), markers).path == named(7).path, "nothing later: Tune says what is wrong"
    with caplog.at_level("WARNING"):  # an older release's checkpoint alone: found by its own name
        assert newest_if_gone(named(3), "es_state.json").path == named(4).path
    assert read_state(tmp_path / "checkpoint_000004") == read_state(tmp_path / "checkpoint_000005") == {}
