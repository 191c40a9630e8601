"""Pictures: `provplug lineage --format svg|html` and `provplug graph`.

The paper's example: AvgAge.Age of NY (35.0) <- R2 <- Person2.Age 30 (Steve),
40 (Mark) <- R1 <- Person1.Age 30, 40. Its workflow: Person1 (4 rows) -> R1
(a filter: 3 rows x 3 columns = 9 triples) -> Person2 (3 rows) -> R2 (group
by City: City 2 + 1 and Age 2 + 1 = 6 triples) -> AvgAge (2 rows)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, EXAMPLES

from provplug.index import build_index
from provplug.ingest.importer import import_provenance
from provplug.store.open import open_store

SVG = "{http://www.w3.org/2000/svg}"
NY_AGE = ("AvgAge.Age", "--where", "City = 'NY'")


@pytest.fixture
def people(paper_rows_store: tuple[Path, dict[int, int]]) -> Path:
    return paper_rows_store[0]


def texts(svg: str) -> list[str]:
    """The text of every <text> element (parsing fails on malformed XML)."""
    root = ET.fromstring(svg)
    return [(t.text or "").strip() for t in root.iter(f"{SVG}text")]


def nodes(svg: str) -> list[ET.Element]:
    return [g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "node"]


def check_paper_answer_svg(svg: str) -> None:
    words = texts(svg)
    # Steve's and Mark's rows in Person1 and Person2 (Age 30 / 40 each), NY's average.
    assert words.count("30") == 2 and words.count("40") == 2 and words.count("35.0") == 1
    assert words.count("Steve") == 2 and words.count("Mark") == 2 and words.count("NY") == 5
    assert words.count("R1") == 2 and words.count("R2") == 2
    assert {"Person1 (2 rows)", "Person2 (2 rows)", "AvgAge (1 row)"} <= set(words)
    assert len(nodes(svg)) == 5  # one node per row


def test_svg_of_the_paper_answer_shows_the_4_ancestors_with_their_values(
    people: Path, cli: Any, tmp_path: Path
) -> None:
    out = tmp_path / "answer.svg"
    result = cli("lineage", people, *NY_AGE, "--format", "svg", "-o", out)
    assert result.code == 0 and result.out == "", result
    check_paper_answer_svg(out.read_text())


def test_svg_of_the_captured_demo_store(spark: Any, tmp_path: Path, cli: Any) -> None:
    from provplug.cli.demo import capture_people

    store = tmp_path / "demo.prov"
    capture_people(spark, str(store))
    assert cli("index", store).code == 0
    result = cli("lineage", store, *NY_AGE, "--format", "svg")
    assert result.code == 0, result
    check_paper_answer_svg(result.out)


def test_the_committed_example_picture_is_the_paper_answer() -> None:
    check_paper_answer_svg((EXAMPLES / "pictures" / "paper_example.svg").read_text())


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.title = ""
        self._in_title = False
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_title = tag == "title" and "svg" not in self.tags  # the page's, not the SVG's titles
        self.tags.append(tag)
        self.external += [v or "" for k, v in attrs if k in ("src", "href") and (v or "").startswith(("http", "//"))]

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False


def test_html_is_a_standalone_page_around_the_svg(people: Path, cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "answer.html"
    assert cli("lineage", people, *NY_AGE, "--format", "html", "-o", out).code == 0
    page = out.read_text()
    parser = _Page()
    parser.feed(page)
    assert parser.title == "Lineage of AvgAge.Age: 4 ancestors, 4 triples"
    assert {"html", "h1", "svg", "text"} <= set(parser.tags)
    assert "script" not in parser.tags and "link" not in parser.tags and parser.external == []
    svg = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    check_paper_answer_svg(svg)
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        return  # no headless browser here: the page was parsed instead
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "<svg" in dom and "Person1 (2 rows)" in dom


def test_graph_shows_every_table_and_op_with_counts(people: Path, cli: Any) -> None:
    result = cli("graph", people, "--format", "svg")
    assert result.code == 0, result
    words = texts(result.out)
    for expected in (
        "Person1",
        "4 rows",
        "Person2",
        "3 rows",
        "AvgAge",
        "2 rows",
        "R1",
        "9 triples",
        "R2",
        "6 triples",
    ):
        assert expected in words, expected
    assert len(nodes(result.out)) == 5  # 3 tables, 2 ops
    text = cli("graph", people).out.splitlines()
    assert text == [
        "3 tables, 2 ops, 15 triples",
        "table AvgAge: 2 rows",
        "table Person1: 4 rows",
        "table Person2: 3 rows",
        "op R1: 9 triples: Person1 -> Person2",
        "op R2: 6 triples: Person2 -> AvgAge",
    ]
    page = cli("graph", people, "--format", "html").out
    _Page().feed(page)
    assert "<svg" in page and "R1" in page
    assert cli("graph", people, "--format", "dot").out.startswith("digraph provplug {")


def test_graph_of_one_run_and_of_an_imported_store(people: Path, cli: Any, tmp_path: Path) -> None:
    run_id = open_store(people).runs()[0]["run_id"]
    lines = cli("graph", people, "--run", run_id).out.splitlines()
    assert lines[:2] == ["run 1 of 1 run", "3 tables, 2 ops, 15 triples"]  # the run --run chose, then the graph
    missing = cli("graph", people, "--run", "no-such-run")
    assert missing.code == 2 and missing.err.count("\n") == 1 and "unknown run 'no-such-run'" in missing.err
    # Imported ops carry no tables: the triples say which tables each op links.
    t4 = tmp_path / "t4.prov"
    import_provenance(open_store(t4), DATA / "paper_table4_triples.csv", DATA / "paper_table4_values.csv")
    lines = cli("graph", t4).out.splitlines()
    assert "op R1: 9 triples: Person1 -> Person2" in lines and "op R2: 6 triples: Person2 -> AvgAge" in lines


@pytest.fixture
def fan_in(tmp_path: Path) -> Path:
    """Imported: A 1..60 -> B 101..160 (copy), every B -> C 1000 (total)."""
    triples, values = tmp_path / "t.csv", tmp_path / "v.csv"
    triples.write_text("src,dst,op\n" + "".join(f"{a},{a + 100},copy\n{a + 100},1000,total\n" for a in range(1, 61)))
    values.write_text("value_id,table\n" + "".join(f"{a},A\n{a + 100},B\n" for a in range(1, 61)) + "1000,C\n")
    path = tmp_path / "fan.prov"
    import_provenance(open_store(path), triples, values)
    build_index(path, engine="local")
    return path


def test_pictures_above_the_threshold_are_summarised_per_table_column(fan_in: Path, cli: Any) -> None:
    full = cli("lineage", fan_in, "--value-id", "1000", "--format", "svg").out
    assert len(nodes(full)) == 121  # 121 cells <= the default threshold: a node each
    summary = cli("lineage", fan_in, "--value-id", "1000", "--format", "svg", "--max-cells", "100").out
    assert len(nodes(summary)) == 3  # A, B and the queried C
    words = texts(summary)
    assert words.count("60 cells") == 2 and "1 queried cells" in words
    assert "60 triples" in words and words.count("copy") == 1 and words.count("total") == 1
    asked = cli("lineage", fan_in, "--value-id", "1000", "--format", "svg", "--summary").out
    assert len(nodes(asked)) == 3


def test_missing_graphviz_package_is_one_line(people: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz now raises ImportError
    for args in (("lineage", people, *NY_AGE, "--format", "svg"), ("graph", people, "--format", "html")):
        result = cli(*args)
        assert result.code == 2 and result.out == "" and result.err.count("\n") == 1, result
        assert "pip install 'provplug[export]'" in result.err


def test_missing_dot_is_one_line_and_writes_nothing(
    people: Path, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = tmp_path / "answer.svg"
    result = cli("lineage", people, *NY_AGE, "--format", "svg", "-o", out)
    assert result.code == 2 and result.err.count("\n") == 1 and "install Graphviz" in result.err, result
    assert not out.exists() and list(tmp_path.glob(".answer.svg*")) == []
    assert cli("graph", people, "--format", "dot").code == 0  # dot source needs no program


def test_unknown_format_is_a_usage_error(people: Path, cli: Any) -> None:
    for args in (("lineage", people, *NY_AGE, "--format", "png"), ("graph", people, "--format", "png")):
        result = cli(*args)
        assert result.code == 2 and "invalid choice: 'png'" in result.err
