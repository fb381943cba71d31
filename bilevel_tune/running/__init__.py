"""Running a study: the options (`options`), the run (`runner`), the command line (`cli`, run as `python -m bilevel_tune.study`)."""
