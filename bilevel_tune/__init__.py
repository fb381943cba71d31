"""bilevel_tune: a bilevel mechanism-design study runner (ES outer loop, RLlib APPO inner loop, Ray Tune).

    run = bilevel_tune.open("docs/results/weekend-confirm")   # a run folder's tables, sections and figures
"""

__version__ = "0.3.0"


def open(run_dir):  # noqa: A001 - the public reader's name: bilevel_tune.open(run_dir)
    """A run folder — live, finished or shipped — read for a notebook (`reader.Run`): `.trials`, `.scores`,
    `.answers`, `.generations` as pandas DataFrames, `.section(name)`, `.figure(name)`. Writes nothing."""
    from bilevel_tune.reader import open_run  # imported when called: `import bilevel_tune` loads no pandas

    return open_run(run_dir)
