"""The documentation's links: every relative link and picture in the README and
docs/ names a file of the repository (and, with ``#anchor``, a heading of that
page), and docs/benchmarks.md links every result file the benchmarks write."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCED = re.compile(r"^```.*?^```", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
EXTERNAL = ("http://", "https://", "mailto:")
BENCHMARKS = REPO / "examples" / "benchmarks"


def documentation() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def links(text: str) -> list[str]:
    """The targets of the Markdown links and pictures of ``text``, outside code."""
    prose = INLINE_CODE.sub("", FENCED.sub("", text))
    return LINK.findall(prose)


def anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of ``text``: lower case, punctuation dropped, spaces to '-'."""
    headings = re.findall(r"^#{1,6}\s+(.*?)\s*$", FENCED.sub("", text), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """Each link of ``page`` that names no file under ``root``, or no heading of the page it names."""
    broken = []
    for target in links(page.read_text()):
        if target.startswith(EXTERNAL):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.is_file() or not linked.is_relative_to(root.resolve()):
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", documentation(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_names_a_file_of_the_repository(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_check_reports_a_missing_file_a_missing_heading_and_ignores_code(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A heading: with punctuation\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading-with-punctuation) [web](https://example.org/x)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) ![pic](pics/none.png)\n"
        "`[in code](missing.md)`\n\n```\n[in a block](missing.md)\n```\n[self](#title)\n# Title\n"
    )
    assert broken_links(page, tmp_path) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nowhere (no such heading)",
        "page.md: pics/none.png (no such file)",
    ]


def test_the_readme_links_every_docs_page() -> None:
    linked = {(REPO / target.partition("#")[0]).resolve() for target in links((REPO / "README.md").read_text())}
    assert sorted(p.name for p in (REPO / "docs").glob("*.md") if p.resolve() not in linked) == []


def test_the_benchmarks_page_links_every_result_file() -> None:
    page = REPO / "docs" / "benchmarks.md"
    linked = {(page.parent / target).resolve() for target in links(page.read_text())}
    results = [p for p in sorted(BENCHMARKS.iterdir()) if p.suffix in (".md", ".json")]
    assert results, "examples/benchmarks holds the result files"
    assert [p.name for p in results if p.resolve() not in linked] == []


def test_the_readme_stays_short() -> None:
    """The README is the pitch, the two commands, the tour and links (issue 24: about 200 lines)."""
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_the_code_cites_documentation_pages_that_exist() -> None:
    """Docstrings and comments cite docs/ pages (never the "DESIGN §N" of a document the
    repository does not have), and every page they cite is there."""
    cited: dict[str, list[str]] = {}
    for folder in ("provplug", "adapters", "examples", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text()
            where = str(path.relative_to(REPO))
            assert "DESIGN §" not in text or path.name == "test_docs.py", f"{where} cites DESIGN"
            for page in re.findall(r"\bdocs/[\w-]+\.md\b", text):
                cited.setdefault(page, []).append(where)
    assert "docs/capture-semantics.md" in cited  # not vacuous: the adapters' docstrings cite it
    assert {page: files for page, files in cited.items() if not (REPO / page).is_file()} == {}
