"""Every metric and record key, defined once: the trainable, study, summary, plots and notebook import these.

Tune's live table shows the first four scalars reported, so REPORT_FIRST
fixes their order: the generation's objective, the best so far, seconds
per generation and the inner loop's OS threads.
"""

# The grid axes: a Tune trial's config, and the cell fields of every record
POPULATION = "population"  # a scan trial's: its grid points
OPTIMIZE_PARAMS = "optimize_params"
SEED = "seed"
TRIAL_KIND = "trial_kind"  # "scan" on a scan trial's config and records; absent on an ES trial's
CELL = "cell"  # each trial's cell fields (Tune's one grid axis before trial plans; runs before 0.2 had the fields as axes)
TRIAL = "trial"  # Tune's one grid axis: each trial's plan (study_data.trial_plan), its cell fields within

# Record structure (bilevel_tune.study_data.run_folder)
KIND = "kind"  # "generation" or "final"
CANDIDATES = "candidates"  # the generation's candidates, u per searched rule
OUTCOMES = "outcomes"  # one Assessment (as a dict, `Assessment.as_dict`) per candidate
STOP_REASON = "stop_reason"  # on a final record: why the trial stopped before its budget
SETTINGS = "settings"  # on generation 0's record and the final one: every setting as the trial ran it

# ES metrics (bilevel_tune.core.es.tell)
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

# The trial's headline: what Tune optimises and the summary ranks.
OBJECTIVE = "objective"  # the generation's best objective, reported first
TUNE_METRIC = BEST_OBJECTIVE
TUNE_MODE = "max"

# Runtime: phase timings as seen from the trial (slowest shard), and the shards themselves
SEC_PER_GEN = "sec_per_gen"
SEC_RESET = "sec_reset"
SEC_TRAIN = "sec_train"
SEC_EVALUATE = "sec_evaluate"
SEC_OPTIMIZER = "sec_optimizer"  # the outer optimiser's own seconds in a generation (ask and tell: BO's GP fit)
SEC_FINAL = "sec_final"  # on the final record: the final re-evaluation's wall time
CORE_S = "core_s"  # a generation's (a scan pass's) CPU seconds, as the OS measured them: the trial's and its shards'
CORE_S_FINAL = "core_s_final"  # on the final record: the final re-evaluation's CPU seconds, likewise
SHARD_CORE_S = "core_s"  # a shard's CPU seconds for its call, in its shard detail
SHARDS = "shards"  # inner-loop actors this generation ran on (one CPU each)
SHARD_DETAIL = "shard_detail"  # per shard: its candidates, node, pid, phase timings and census
SHARD_FIRST, SHARD_SIZE, NODE = "first", "size", "node"  # keys inside a shard's detail (node: Ray's node id)
NODE_IP = "node_ip"  # the node's address: a machine keeps it across sessions, while Ray's node id is new in each

# Census, totals over the trial's shards (bilevel_tune.inner.census)
THREADS_PY = "threads_py"
THREADS_OS = "threads_os"
THREADS_GRPC = "threads_grpc"  # gRPC's self-scaling pools, part of threads_os
LEARNER_THREADS = "learner_threads"
RSS_MB = "rss_mb"
# what the resident memory is (Linux; −1 elsewhere): the process's own anonymous pages (heap, tensors) and the
# shared-memory pages it has mapped (Ray's object store); the rest of rss_mb is files (libraries)
RSS_ANON_MB = "rss_anon_mb"
RSS_SHMEM_MB = "rss_shmem_mb"
PID = "inner_pid"  # one shard's process: which one to look at (or kill, in fault tests)
CENSUS_KEYS = (THREADS_PY, THREADS_OS, THREADS_GRPC, LEARNER_THREADS, RSS_MB, RSS_ANON_MB, RSS_SHMEM_MB, PID)
REPORT_FIRST = (OBJECTIVE, BEST_OBJECTIVE, SEC_PER_GEN, THREADS_OS)

# Per-candidate outcome fields beside the objective (an Assessment's; its world names the rest)
UPPER_BOUND = "upper_bound"

# Flattened prefixes
MEAN_RULE = "mean/"  # mean/<rule>: the search mean, physical
BEST_RULE = "best/"  # best/<rule>: the best-so-far candidate, physical
BEST_DIAG = "best_diag/"  # best_diag/<diagnostic> of the generation's best candidate
CANDIDATE = "cand/"  # cand/<k>/objective and cand/<k>/<rule>: each candidate of the generation

# A scan trial (bilevel_tune.core.scan): its generations are passes — 0 on the evaluation seeds, then one per final seed
SCAN_BEST = "scan/best"  # on a scan's final record: the best objective of pass 0 over the grid
SCAN_BEST_POINT = "scan/best_point"  # … and the grid point (u per searched rule) where it is

# The final re-evaluation after the last generation (final record and last Tune report)
FINAL = "final/"
FINAL_BEST = FINAL + "best"  # the best-so-far candidate, retrained on fresh seeds: the verdicts' value
FINAL_BEST_STD = FINAL + "best_std"
FINAL_MEAN = FINAL + "mean"  # the final search mean, likewise
FINAL_MEAN_STD = FINAL + "mean_std"
FINAL_SEEDS = FINAL + "seeds"
# … and seed by seed, on the final record only (not a Tune metric): {"seeds": [...], "best": [...], "mean": [...]}
FINAL_BY_SEED = "final_by_seed"
# … and at each smaller budget the run is also compared at ([decide] equal_budget), on the final record only:
# {"<E>": {"evaluations": what its incumbent had spent, "generation": its last generation, "best_objective": its best
# so far then, "final/best": …, "final/mean": … (the means), "best": [...], "mean": [...] (seed by seed)}}
FINAL_AT_EVALUATIONS = "final_at_evaluations"
