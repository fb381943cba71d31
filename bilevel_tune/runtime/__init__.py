"""The runtime: Ray started with capped threads (`ray_init`), what differs between Ray releases (`ray_compat`), the cluster (`cluster`), exit status and signals (`lifecycle`)."""
