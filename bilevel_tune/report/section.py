"""A summary section, and the summary that holds them: what each computed from the run's design and store.

    Section(name, compute, markdown, short, record, tables)

A section computes its content once, from the `Summary` (the run's design and store, and any other section's
content, by name: `summary.answers`), renders it whole for summary.md and, where a page may quote it, short for a
README; it gives its part of verdicts.json and the CSV files it writes. The summary is the list of them
(`pipeline.SECTIONS`): a new section is one module of its own and one line there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd


@dataclass(frozen=True)
class Section:
    name: str  # how summary.md, verdicts.json, the quotes, TensorBoard and the notebook name it
    compute: Callable[["Summary"], Any] | None = None  # its content (None: it renders from the others')
    markdown: Callable[["Summary"], list[str]] | None = None  # whole, in summary.md ([]: the run has none)
    short: Callable[["Summary"], list[str]] | None = None  # for a page that quotes it (None: not quotable)
    record: Callable[["Summary"], dict[str, Any]] | None = None  # its part of verdicts.json
    tables: Callable[["Summary"], dict[str, pd.DataFrame]] | None = None  # the CSV files it writes, by name


class Summary:
    """A run's summary: its design, its store, and each section's content, computed on first use (`summary.ceiling`)."""

    def __init__(self, store, sections: Sequence[Section]):
        self.store, self.design, self.sections = store, store.design, tuple(sections)
        self._by_name = {s.name: s for s in self.sections}
        self._parts: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        section = self.__dict__.get("_by_name", {}).get(name)
        if section is None or section.compute is None:
            raise AttributeError(f"a summary has no section {name!r}")
        if name not in self._parts:
            self._parts[name] = section.compute(self)
        return self._parts[name]

    # the store's tables, which every section reads
    @property
    def trials(self) -> pd.DataFrame:
        return self.store.trials_table

    @property
    def generations(self) -> pd.DataFrame:
        return self.store.generations_table

    @property
    def scans(self) -> pd.DataFrame:
        return self.store.scan_table

    @property
    def scan_bests(self) -> pd.DataFrame:
        return self.store.scan_bests

    def markdown(self) -> list[tuple[str, list[str]]]:
        """(name, lines) of each section that renders in summary.md, in the list's order."""
        return [(s.name, lines) for s in self.sections if s.markdown and (lines := s.markdown(self))]

    def record(self) -> dict[str, Any]:
        """verdicts.json: each section's part, in the list's order."""
        return {k: v for s in self.sections if s.record for k, v in s.record(self).items()}

    def tables(self) -> dict[str, pd.DataFrame]:
        """The CSV files the sections write, by name."""
        return {k: v for s in self.sections if s.tables for k, v in s.tables(self).items()}

    def short(self, name: str) -> list[str]:
        """A quotable section's short form (a README's quote)."""
        section = self._by_name.get(name)
        if section is None or section.short is None:
            raise KeyError(f"no quotable section {name!r}; quotable: {', '.join(s.name for s in self.sections if s.short)}")
        return section.short(self)
