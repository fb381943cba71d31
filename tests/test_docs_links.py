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
