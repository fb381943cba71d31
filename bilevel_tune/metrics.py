"""Every metric key, defined once (trainable, study, summary and notebook import these).

Tune's live table shows the first four scalars reported, so REPORT_FIRST
fixes their order: the generation's objective, the best so far, seconds
per generation and the actor's OS threads.
"""

# ES metrics (bilevel_tune.es.tell)
GENERATION = "generation"
SIGMA = "sigma"
MEAN = "mean"
GEN_BEST_OBJECTIVE = "gen_best_objective"
GEN_BEST_CANDIDATE = "gen_best_candidate"
OBJECTIVE_MEAN = "objective_mean"
OBJECTIVE_STD = "objective_std"
BEST_OBJECTIVE = "best_objective"
BEST_CANDIDATE = "best_candidate"
BEST_GENERATION = "best_generation"
FAILED = "failed"
ALL_FAILED = "all_failed"
ACCEPTED = "accepted"
GRAD_NORM = "grad_norm"
ES_KEYS = (
    GENERATION,
    SIGMA,
    MEAN,
    GEN_BEST_OBJECTIVE,
    GEN_BEST_CANDIDATE,
    OBJECTIVE_MEAN,
    OBJECTIVE_STD,
    BEST_OBJECTIVE,
    BEST_CANDIDATE,
    BEST_GENERATION,
    FAILED,
)

# The trial's headline: what Tune optimises and the summary ranks.
OBJECTIVE = "objective"  # the generation's best objective, reported first
TUNE_METRIC = BEST_OBJECTIVE
TUNE_MODE = "max"

# Runtime and census (bilevel_tune.actor)
SEC_PER_GEN = "sec_per_gen"
SEC_RESET = "sec_reset"  # inner loop, as seen from the trial (Ray calls included)
SEC_TRAIN = "sec_train"
SEC_EVALUATE = "sec_evaluate"
THREADS_PY = "threads_py"
THREADS_OS = "threads_os"
THREADS_GRPC = "threads_grpc"  # gRPC's self-scaling pools, part of threads_os
LEARNER_THREADS = "learner_threads"
RSS_MB = "rss_mb"
PID = "inner_pid"  # the inner-loop actor's process: which one to look at (or kill, in fault tests)
CENSUS_KEYS = (THREADS_PY, THREADS_OS, THREADS_GRPC, LEARNER_THREADS, RSS_MB, PID)
REPORT_FIRST = (OBJECTIVE, BEST_OBJECTIVE, SEC_PER_GEN, THREADS_OS)

# Per-candidate outcome fields (bilevel_tune.objective.candidate_outcomes)
OUTCOME_OBJECTIVE = "objective"
UPPER_BOUND = "upper_bound"
DIAGNOSTICS = (
    "mean_reward",
    "sustainability",
    "requested_fraction",
    "allowed_fraction",
    "pressure",
    "flow_penalty",
    "quota_penalty",
)

# Flattened prefixes
MEAN_RULE = "mean/"  # mean/<rule>: the search mean, physical
BEST_RULE = "best/"  # best/<rule>: the best-so-far candidate, physical
BEST_DIAG = "best_diag/"  # best_diag/<diagnostic> of the generation's best candidate
FINAL = "final/"  # final/<...>: the re-evaluation after the last generation
