"""The built-in studies, as data: one TOML file each (docs/study.md).

This folder sits at the repository's top, as the design lays out; the wheel ships it inside the package as
`bilevel_tune.studies` (setup.py maps it), so `bilevel-study weekend` finds them from any folder.
"""
