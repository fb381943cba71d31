"""Sections quoted in the docs, kept equal to the summaries they quote: no figure in a page is typed by hand.

A page quotes a shipped result's section in its short form (`Section.short`, `report.pipeline.SECTIONS`) between
two markers that name the section and the folder, relative to the repository root:

    <!-- answers: docs/results/weekend-appo -->
    ...the Answers, short: what each comparison answered, B − A and the seeds...
    <!-- /answers -->

The quotable sections: `answers`; `robustness` (the held-out learners' findings in words), `optimizers` (which one
comes within ε soonest, per mechanism), `needed` (the smallest budget at which the decided rows read the same) and
`against` (what the run says of its pilot's decisions). Each is rendered from the folder's store, as its summary is
(`summarise`), never read back out of summary.md.

`refresh(page)` rewrites every such block; `stale(page)` names the blocks that differ (a test holds README.md to
it).

    python -m bilevel_tune.cli.quotes README.md docs/worlds.md   # refresh the quoted blocks
    python -m bilevel_tune.cli.quotes --check README.md          # name the stale ones (exit 1), write nothing

A page that is not there, or a quote of a folder without a summary.md, is refused in one line (exit 2) before any
page is written: refreshed, such a quote would be emptied.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bilevel_tune.report.pipeline import summarise
from bilevel_tune.study_data.run_folder import SUMMARY_MARKDOWN
from bilevel_tune.study_data.run_store import StoreError, open_store

QUOTE = re.compile(
    r"(?P<open><!-- (?P<kind>answers|robustness|optimizers|needed|against): (?P<folder>\S+) -->)(?P<block>.*?)(?P<close><!-- /(?P=kind) -->)",
    re.S,
)


def _source(root: Path, match: re.Match, summaries: dict) -> str:
    """The section's short form as the folder's summary renders it now ('' for a folder that is not a run's)."""
    folder = match["folder"]
    if folder not in summaries:
        try:
            summaries[folder] = summarise(open_store(root / folder)) if (root / folder / SUMMARY_MARKDOWN).is_file() else None
        except StoreError:
            summaries[folder] = None
    summary = summaries[folder]
    return "\n".join(summary.short(match["kind"])).strip() if summary is not None else ""


class QuoteError(Exception):
    """A page that cannot be refreshed: the message names it and what is wrong."""


def root_of(page: Path) -> Path:
    """The repository a page lives in (the folder holding pyproject.toml)."""
    page = Path(page).resolve()
    root = next((p for p in page.parents if (p / "pyproject.toml").is_file()), None)
    if root is None:
        raise QuoteError(f"{page} is in no repository (no pyproject.toml above it): its quotes name folders from one")
    return root


def unquotable(page: Path) -> list[str]:
    """The folders a page quotes that have no summary.md to quote."""
    return [folder for folder, _, source in quoted(page) if not source]


def quoted(page: Path) -> list[tuple[str, str, str]]:
    """(folder, the block as the page has it, the block as the folder's summary has it now) per quote."""
    text, root, summaries = Path(page).read_text(), root_of(page), {}
    return [(match["folder"], match["block"], _source(root, match, summaries)) for match in QUOTE.finditer(text)]


def stale(page: Path) -> list[str]:
    """The folders whose quoted block differs from their summary's (or that have none)."""
    return [folder for folder, block, source in quoted(page) if not source or block.strip() != source.strip()]


def refresh(page: Path) -> int:
    """Rewrite every quoted block from its folder's summary; returns how many changed."""
    page = Path(page)
    text, root, changed, summaries = page.read_text(), root_of(page), 0, {}

    def replace(match: re.Match) -> str:
        nonlocal changed
        source = _source(root, match, summaries)
        changed += match["block"].strip() != source.strip()
        return f"{match['open']}\n{source}\n{match['close']}"

    page.write_text(QUOTE.sub(replace, text))
    return changed


def _checked(pages: list[Path]) -> None:
    """Every page there and every quote's folder summarised, or a QuoteError before anything is written."""
    for page in pages:
        if not page.is_file():
            raise QuoteError(f"no page {page}: name markdown files that quote shipped results (README.md, docs/*.md)")
        if missing := unquotable(page):
            raise QuoteError(f"{page} quotes {', '.join(missing)}, which has no {SUMMARY_MARKDOWN}: ship it or mend the marker")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bilevel_tune.cli.quotes", description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", type=Path, default=[Path("README.md")], help="markdown pages (README.md)")
    parser.add_argument("--check", action="store_true", help="name the stale quotes and exit 1 if any; write nothing")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help exits 0, a bad argument 2 (its one-line usage is printed)
        return int(exit_.code or 0)
    try:
        _checked(args.pages)
    except QuoteError as error:
        print(f"quotes: {error}", file=sys.stderr)
        return 2
    if args.check:
        stale_quotes = [(page, folder) for page in args.pages for folder in stale(page)]
        for page, folder in stale_quotes:
            print(f"{page}: the quote of {folder} differs from its {SUMMARY_MARKDOWN}")
        return 1 if stale_quotes else 0
    for page in args.pages:
        print(f"{page}: {refresh(page)} block(s) refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
