"""Every relative link and image in README.md and docs/ resolves to a file git tracks (a fresh clone has it)."""

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target) and ![alt](target)


def tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return set(out.splitlines())


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold commands, not links
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_every_relative_link_of_the_readme_and_docs_is_a_tracked_file():
    files = tracked()
    folders = {str(Path(f).parent) for f in files} | {str(p) for f in files for p in Path(f).parents}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in relative_links(page):
            path = (page.parent / unquote(target.split("#", 1)[0])).resolve()
            rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
            if rel not in files and rel.rstrip("/") not in folders:
                broken.append(f"{page.relative_to(ROOT)} → {target}")
    assert broken == [], "links to files git does not track:\n" + "\n".join(broken)


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("![a picture](results/missing.png) and [a page](other.md#part) and [web](https://example.org)\n")
    assert relative_links(page) == ["results/missing.png", "other.md#part"]


def test_the_readme_is_one_screenful_of_answers_quoted_from_the_shipped_summaries():
    from bilevel_tune.cli import quotes

    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 150
    assert "make study" in readme.read_text() and "make test" in readme.read_text()
    assert len(quotes.quoted(readme)) >= 3
    assert quotes.stale(readme) == [], "run: python -m bilevel_tune.cli.quotes README.md"
    answers = re.findall(r"<!-- answers: \S+ -->(.*?)<!-- /answers -->", readme.read_text(), re.S)
    assert len(answers) >= 3
    for block in answers:  # the short form: what was answered, no method paragraph
        header = next(line for line in block.splitlines() if line.startswith("| comparison"))
        assert header.count("|") - 1 <= 5 and "Every cell runs the same seeds" not in block


def test_every_page_that_quotes_a_shipped_result_quotes_it_as_it_is():
    from bilevel_tune.cli import quotes

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    quoting = [p for p in pages if quotes.quoted(p)]
    assert ROOT / "docs" / "worlds.md" in quoting  # the fishery's answers
    for page in quoting:
        assert quotes.stale(page) == [], f"run: python -m bilevel_tune.cli.quotes {page.relative_to(ROOT)}"


def _a_repository_with_a_run(tmp_path):
    """A repository (its pyproject.toml) holding one shipped result, `run`; its summary's short sections."""
    import shutil

    from bilevel_tune.report.pipeline import summarise
    from bilevel_tune.study_data.run_store import open_store

    (tmp_path / "pyproject.toml").write_text("")
    shutil.copytree(ROOT / "docs" / "results" / "fishery-analytic", tmp_path / "run")
    summary = summarise(open_store(tmp_path / "run"))
    return {name: "\n".join(summary.short(name)).strip() for name in ("answers", "robustness")}


def test_a_stale_quote_is_seen(tmp_path):
    from bilevel_tune.cli import quotes

    short = _a_repository_with_a_run(tmp_path)
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- answers: run -->\n| a |\n|---|\n| 2 |\n<!-- /answers -->\nend\n")
    assert quotes.stale(page) == ["run"]
    assert quotes.refresh(page) == 1 and quotes.stale(page) == []
    assert page.read_text() == f"intro\n<!-- answers: run -->\n{short['answers']}\n<!-- /answers -->\nend\n"
    assert "| comparison" in short["answers"] and "Every cell runs the same seeds" not in short["answers"]

    # the held-out learners' findings the same way, beside it
    page.write_text(page.read_text() + "<!-- robustness: run -->\nold\n<!-- /robustness -->\n")
    assert quotes.stale(page) == ["run"] and quotes.refresh(page) == 1
    assert page.read_text().endswith(f"end\n<!-- robustness: run -->\n{short['robustness']}\n<!-- /robustness -->\n")
    assert short["robustness"].startswith("- ")


def test_the_quotes_command_checks_and_refuses_before_it_writes(tmp_path, capsys):
    from bilevel_tune.cli import quotes

    _a_repository_with_a_run(tmp_path)
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- answers: run -->\n| a |\n|---|\n| 2 |\n<!-- /answers -->\n")
    before = page.read_text()

    # --check names the stale quote and writes nothing
    assert quotes.main(["--check", str(page)]) == 1
    assert f"{page}: the quote of run differs" in capsys.readouterr().out and page.read_text() == before

    # a quote of a folder with no summary.md would be emptied: refused, no page written, the good one neither
    other = tmp_path / "other.md"
    other.write_text("<!-- answers: gone -->\nkept\n<!-- /answers -->\n")
    assert quotes.main([str(page), str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"quotes: {other} quotes gone, which has no summary.md: ship it or mend the marker"
    assert page.read_text() == before and "kept" in other.read_text()

    # a page that is not there: one line, exit 2
    assert quotes.main([str(tmp_path / "nope.md")]) == 2
    assert capsys.readouterr().err.startswith(f"quotes: no page {tmp_path / 'nope.md'}")

    # refreshed, then current
    assert quotes.main([str(page)]) == 0 and "1 block(s) refreshed" in capsys.readouterr().out
    assert quotes.main(["--check", str(page)]) == 0 and "| comparison" in page.read_text()


def test_the_docs_index_lists_every_shipped_result():
    index = (ROOT / "docs" / "README.md").read_text()
    shipped = sorted(p.parent.name for p in (ROOT / "docs" / "results").glob("*/summary.md"))
    assert len(shipped) >= 8
    assert [name for name in shipped if f"(results/{name}/summary.md)" not in index] == []
