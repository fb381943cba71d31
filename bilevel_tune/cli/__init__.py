"""The command line and the run it makes: the options (`options`), the run (`runner`), a run in stages (`staging`), the command line itself (`main`, run as `python -m bilevel_tune.study`)."""
