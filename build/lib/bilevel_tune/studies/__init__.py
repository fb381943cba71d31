"""The built-in studies, as data: one TOML file each (docs/study.md). They ship inside the package."""
