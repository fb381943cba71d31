"""The vocabulary of a run's tables: the columns the summary reads, the grid's factors, the defaults of a bare table.

Every section of the summary (`pipeline`) reads the tables the run's store keeps (`study_data.run_store`: made
from its records by `run_tables`, or a shipped folder's CSVs) through these names. pandas only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bilevel_tune.base.sections import SummarySettings
from bilevel_tune.study_data.incumbents import GENERATION_BEST  # noqa: F401 - a column the summary reads
from bilevel_tune.study_data.run_tables import (  # noqa: F401 - the tables' columns, named where they are made
    BEST,
    BOUND_BY,
    FINAL,
    FINAL_MEAN,
    MECHANISM,
    OPTIMIZER,
    at_budget,
)
from bilevel_tune.study_data.settings import is_setting_key

# The grid's factors besides the seed (a study's further axes add theirs). The mechanism factor is `dims` (1-D vs
# 2-D) when each dimensionality has one set of searched rules, else `mechanism`, the set itself (2-D vs 2-D floor+risk).
BASE_FACTORS = ("population", "dims")
SEARCH_VS_GRID = "search_vs_grid"
# a bare table's: the campaign's ceiling (a study's is its world's, `Study.ceiling`), and [summary] tol's default
DEFAULT_CEILING, DEFAULT_TOL = 0.25, SummarySettings().tol


class SummaryError(ValueError):
    """A folder that is not a study run; the message is the one line the user sees."""


def factors(table: pd.DataFrame) -> list[str]:
    """The grid's factors a table has: population, the mechanism (dims, or the searched rules where two
    mechanisms share a dimensionality), and a column per further axis (a setting's key)."""
    return ["population", mechanism_factor(table), *(c for c in table.columns if is_setting_key(c))]


def mechanism_factor(table: pd.DataFrame) -> str:
    """`dims` while every dimensionality has one mechanism (the campaign's 1-D / 2-D), else `mechanism`."""
    if MECHANISM in table and len(table) and table.groupby("dims")[MECHANISM].nunique().max() > 1:
        return MECHANISM
    return "dims"


def finished(trials: pd.DataFrame) -> pd.DataFrame:
    """The trials that ran a generation (missing ones are rows of the trials table too)."""
    return trials[trials.get("generations", 0) > 0]


def native(value):
    return value.item() if hasattr(value, "item") else value


def shown(level) -> str:
    """A level as a sentence names it: 0.05, not 0.05000000000000001; 16."""
    level = native(level)
    return f"{level:g}" if isinstance(level, float) else str(level)


INTEGER_COLUMNS = {
    "population", "dims", "seed", "generations", "best_generation", "shards", "nodes", "max_threads", "n_seeds",
    "budget_generations", "failed_candidates", "points", "first generation",
}  # fmt: skip


def cell_text(column: str, value) -> str:
    """One table entry: integers as integers, measured values to 4 decimals, missing as –."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if column in INTEGER_COLUMNS and isinstance(value, (int, float, np.integer, np.floating)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{value:.4f}"
    return str(value)


def markdown_table(df: pd.DataFrame) -> str:
    """Markdown with integers as integers (tabulate would float every entry of a mixed row)."""
    if df.empty:
        return "(no data)"
    text = pd.DataFrame({c: [cell_text(c, v) for v in df[c]] for c in df.columns})
    return text.to_markdown(index=False, disable_numparse=True)
