"""Planning: shards per trial, the schedule and its ETA (`plan`), from probes of this machine (`calibration`)."""
