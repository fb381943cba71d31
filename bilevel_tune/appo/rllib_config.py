"""RLlib's side of an APPO loop's build: APPO's settings from the study's, a quiet build (the block's world: `world_io`)."""

from __future__ import annotations

import logging

from bilevel_tune.inner import InnerLoopConfig


def appo_config(config: InnerLoopConfig, seed: int):
    """RLlib's APPOConfig with the study's APPO settings: new API stack, torch, local learner, sampling in-process."""
    from ray.rllib.algorithms.appo import APPOConfig

    training = dict(
        gamma=config.discount,
        lr=config.lr,
        entropy_coeff=config.entropy_coeff,
        grad_clip=config.grad_clip,
        vtrace=True,
        vtrace_clip_rho_threshold=config.vtrace_clip_rho_threshold,
        vtrace_clip_pg_rho_threshold=config.vtrace_clip_pg_rho_threshold,
        # fragments (seasons) of the whole block per batch, in env steps: one step advances every copy of the block
        train_batch_size_per_learner=config.season_length * config.fragments_per_batch,
        num_epochs=1,
    )
    appo = APPOConfig()
    if hasattr(appo, "use_circular_buffer"):  # absent on Ray 2.53
        # A plain queue blocks instead of sleep-polling, can be drained exactly, and samples no unseeded RNG.
        training["use_circular_buffer"] = False
    else:
        # Ray 2.53's only buffer replays each batch up to twice, picked by an unseeded RNG as timing allows:
        # the population loop, whose learner keeps pace with its sampler, then ended some K = 50 runs below
        # where it began (4 of 30 in benchmarks' parity setting, one at 0.08 from 0.27). Once per batch, as
        # the plain queue does: none of 12.
        training["circular_buffer_iterations_per_batch"] = 1
    return (
        appo.api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=config.season_length)
        .learners(num_learners=0)
        .training(**training)
        .reporting(min_time_s_per_iteration=0, metrics_num_episodes_for_smoothing=1)
        # log_sys_usage=False: no UtilMonitor thread, whose join costs ~0.6 s at every stop
        .debugging(seed=int(seed), log_level="ERROR", log_sys_usage=False)
    )


def algorithm_from(algo_config):
    """The Algorithm of a config: `build_algo` where RLlib has it, `build` in the releases before it."""
    return algo_config.build_algo() if hasattr(algo_config, "build_algo") else algo_config.build()


def quiet_rllib() -> None:
    """RLlib warns on every build (new API stack, env re-registered, gputil); once is plenty."""
    import warnings

    for name in ("ray.rllib", "ray.tune", "ray.util", "ray._common"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*Overriding environment.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
