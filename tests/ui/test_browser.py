"""The explorer in a real browser (Debian's Chromium, driven by Playwright):
the issue's walk through the README's people store, every value shown as
text, and a large answer opened summarised. Screenshots are kept (see
conftest.screenshot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from .conftest import wait_ready

pytestmark = pytest.mark.browser


def cells(page: Any, table: str) -> set[tuple[str, str]]:
    """(column, value) of every cell drawn in the nodes of ``table``."""
    return {
        (c.get_attribute("data-column"), c.get_attribute("data-value"))
        for c in page.query_selector_all(f'.node[data-table="{table}"] .c')
    }


def drawn_tables(page: Any) -> set[str]:
    return {n.get_attribute("data-table") for n in page.query_selector_all("#graph .node")}


def navigate(page: Any, action: Any) -> None:
    with page.expect_navigation():
        action()
    wait_ready(page)


def test_the_readme_walk_tables_rows_lineage_depth_downstream_whatif(
    demo_store: Path, serve: Any, browser_page: Any, screenshot: Any
) -> None:
    page, base = browser_page, serve(demo_store)
    page.goto(base + "tables")
    wait_ready(page)
    page.fill("#search", "AvgAge")
    assert [a.inner_text() for a in page.query_selector_all("a.table-link")] == ["AvgAge"]
    screenshot(page, "1-tables-search")
    navigate(page, lambda: page.click('a.table-link[data-table="AvgAge"]'))
    ny_row = page.locator("tr", has=page.locator("td", has_text="NY"))
    navigate(page, lambda: ny_row.locator('a.cell[data-column="Age"]').click())
    # New York's average and its four ancestors, with their values.
    assert cells(page, "AvgAge") == {("Age", "35.0")}
    assert cells(page, "Person2") == {("Age", "30"), ("Age", "40")}
    assert cells(page, "Person1") == {("Age", "30"), ("Age", "40")}
    assert "4 ancestors" in page.inner_text("#answer-stats")
    screenshot(page, "2-lineage-ny-age")
    whole_view = {t: cells(page, t) for t in drawn_tables(page)}

    # Highlight the path from Mark's Person1 age to the queried cell; collapse Person2's rows.
    page.click('.node[data-table="Person1"] .c[data-value="40"] .v')
    assert {(c.get_attribute("data-value")) for c in page.query_selector_all(".c.hl")} == {"40", "35.0"}
    assert len(page.query_selector_all("svg.edges path.hl")) == 2
    screenshot(page, "3-lineage-path")
    expanded = page.locator('.node[data-table="Person2"] button.toggle[title="collapse"]')
    for _ in range(expanded.count()):
        expanded.first.click()  # each click redraws the graph
    assert drawn_tables(page) == {"AvgAge", "Person2"}
    page.locator('.node[data-table="Person2"] button.toggle[title="expand"]').first.click()
    assert cells(page, "Person1") in ({("Age", "30")}, {("Age", "40")})

    page.fill("#depth", "1")
    navigate(page, lambda: page.click("#apply-depth"))
    assert drawn_tables(page) == {"AvgAge", "Person2"}
    assert cells(page, "Person2") == {("Age", "30"), ("Age", "40")}
    screenshot(page, "4-lineage-depth-1")

    # Downstream from Steve's Person1.Age (30): his Person2 age, then NY's average.
    page.fill("#depth", "")
    navigate(page, lambda: page.click("#apply-depth"))
    steve = page.locator('.node[data-table="Person1"]', has_text="Steve")
    navigate(page, lambda: steve.locator('.c[data-column="Age"] a[title="descendants of this cell"]').click())
    assert cells(page, "Person1") == {("Age", "30")} and "Steve" in page.inner_text('.node[data-table="Person1"]')
    assert cells(page, "Person2") == {("Age", "30")} and cells(page, "AvgAge") == {("Age", "35.0")}
    assert "1" in page.inner_text("h1") and "Descendants" in page.inner_text("h1")
    screenshot(page, "5-lineage-downstream-steve")

    page.goto(base + "whatif")
    wait_ready(page)
    page.select_option("#delete-table", "Person1")
    page.fill("#delete-where", "Name = 'Mark'")
    navigate(page, lambda: page.click("#delete-rows"))
    change = page.locator('.effect[data-table="AvgAge"] .change[data-column="Age"]')
    assert (change.locator(".old").inner_text(), change.locator(".new").inner_text()) == ("35.0", "30.0")
    assert "vanishes" in page.inner_text('.effect[data-table="Person2"]')
    screenshot(page, "6-whatif-delete-mark")

    page.goto(base + "lineage?table=AvgAge&column=Age&where=" + quote("City = 'NY'"))
    wait_ready(page)
    assert {t: cells(page, t) for t in drawn_tables(page)} == whole_view
    screenshot(page, "7-lineage-by-url")


def test_the_workflow_graph_s_ops_and_tables_are_clickable(
    demo_store: Path, serve: Any, browser_page: Any, screenshot: Any
) -> None:
    page, base = browser_page, serve(demo_store)
    page.goto(base + "graph")
    wait_ready(page)
    page.click('.node.op[data-name="R2"]')
    panel = page.inner_text("#op-panel")
    assert "reads: Person2" in panel and "writes: AvgAge" in panel
    screenshot(page, "8-workflow")
    navigate(page, lambda: page.click('.node.table[data-name="Person2"]'))
    assert page.url.startswith(base + "table?name=Person2")
    assert len(page.query_selector_all("a.cell[data-column=Name]")) == 3


def test_the_summary_view_and_sources_only_of_a_small_answer(demo_store: Path, serve: Any, browser_page: Any) -> None:
    page, base = browser_page, serve(demo_store)
    page.goto(base + "lineage?table=AvgAge&column=Age&sources_only=1")
    wait_ready(page)
    assert drawn_tables(page) == {"AvgAge", "Person1"}
    navigate(page, lambda: page.check("#summary"))
    assert {c.get_attribute("data-table") for c in page.query_selector_all("#summary .card")} == {"Person1"}


XSS = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "<b onmouseover=alert(3)>bold</b>"]


@pytest.fixture(scope="module")
def xss_store(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """People whose names (and a table's name) are markup."""
    import provplug
    from provplug.cli.demo import adults, average_age

    store = tmp_path_factory.mktemp("xss") / "xss.prov"
    people = spark.createDataFrame([(XSS[0], "NY", 30), (XSS[1], XSS[2], 40)], "Name string, City string, Age int")
    with provplug.capture(spark, store=store) as run:
        average_age(adults(run.source(people.coalesce(1), "Person1")))
    provplug.open(store).index()
    return store


def assert_only_text(page: Any) -> None:
    """No element the values could have made, and the values there as text."""
    assert page.evaluate("document.querySelectorAll('img, b[onmouseover], [onerror]').length") == 0
    assert page.evaluate("[...document.scripts].map(s => s.getAttribute('src'))") == ["/static/app.js"]


def test_stored_markup_is_shown_as_text_everywhere(
    xss_store: Path, serve: Any, browser_page: Any, screenshot: Any
) -> None:
    page, base = browser_page, serve(xss_store)
    page.goto(base + "table?name=Person1")
    wait_ready(page)
    text = page.inner_text("main")
    assert all(x in text for x in XSS), text
    assert_only_text(page)
    screenshot(page, "9-xss-rows")
    navigate(page, lambda: page.locator('a.cell[data-column="Age"]').first.click())
    page.select_option("#direction", "down")
    wait_ready(page)
    page.wait_for_selector('.node[data-table="AvgAge"]')
    assert XSS[0] in page.inner_text("#graph")
    assert_only_text(page)
    page.goto(base + "whatif?delete=Person1&where=" + quote("Age > 0"))
    wait_ready(page)
    assert XSS[0] in page.inner_text("#effects") and XSS[2] in page.inner_text("#effects")
    assert_only_text(page)
    page.goto(base + "lineage?table=Person1&column=Name&where=" + quote("Name = '<bad'"))  # an error, as text
    wait_ready(page)
    assert_only_text(page)
    screenshot(page, "10-xss-whatif")


@pytest.fixture(scope="module")
def wide_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An import where one total has 3,000 parents in two tables: an answer above the summarising threshold."""
    folder = tmp_path_factory.mktemp("wide")
    parents = range(1, 3001)
    (folder / "t.csv").write_text("src,dst,op\n" + "".join(f"{v},0,total\n" for v in parents))
    (folder / "v.csv").write_text(
        "value_id,table,column\n0,Report,total\n"
        + "".join(f"{v},{'Sales' if v % 3 else 'Refunds'},amount\n" for v in parents)
    )
    store = folder / "wide.prov"
    assert _import(store, folder) == 0
    return store


def _import(store: Path, folder: Path) -> int:
    from provplug.cli.main import main

    code = main(
        ["import", str(store), "--triples", str(folder / "t.csv"), "--values", str(folder / "v.csv"), "--quiet"]
    )
    return code or main(["index", str(store)])


def test_a_large_answer_opens_summarised_and_expands_a_table_on_request(
    wide_store: Path, serve: Any, browser_page: Any, screenshot: Any
) -> None:
    page, base = browser_page, serve(wide_store)
    page.goto(base + "lineage?value_id=0")
    wait_ready(page)
    counts = {
        c.get_attribute("data-table"): c.query_selector(".muted").inner_text()
        for c in page.query_selector_all("#summary .card")
    }
    assert counts == {"Sales": "2,000 cells", "Refunds": "1,000 cells"}
    assert page.query_selector_all("#graph .node") == []  # not drawn cell by cell
    sales = page.locator('#summary .card[data-table="Sales"]')
    sales.locator("button.expand").click()
    page.wait_for_selector('.card[data-table="Sales"] table.slice tbody tr')
    assert sales.locator("table.slice tbody tr").count() == 200
    sales.locator("button.more").click()
    sales.locator("table.slice tbody tr").nth(399).wait_for()  # (the page's policy forbids evaluating strings)
    listed = sales.locator("table.slice tbody tr td:nth-child(3)").all_inner_texts()  # "value N": no stored row
    assert len(set(listed)) == 400 and all(int(v.split()[1]) % 3 for v in listed)
    screenshot(page, "11-large-answer-summary")


def test_runs_and_the_diff_of_two_runs(
    spark: Any, tmp_path: Path, serve: Any, browser_page: Any, screenshot: Any
) -> None:
    import provplug
    from provplug.cli.demo import adults, average_age

    store = tmp_path / "two.prov"
    for mark in (40, 50):
        people = spark.createDataFrame(
            [("Steve", "NY", 30), ("Mark", "NY", mark), ("Mary", "LA", 20)], "Name string, City string, Age int"
        ).coalesce(1)
        with provplug.capture(spark, store=store) as run:
            average_age(adults(run.source(people, "Person1")))
    provplug.open(store).index()
    page, base = browser_page, serve(store)
    page.goto(base + "runs")
    wait_ready(page)
    assert page.locator("table.grid tbody tr").count() == 2
    numbers = page.locator("table.grid tbody tr td:first-child").all_inner_texts()
    assert numbers == ["1", "2"] and "python " in page.locator("table.grid tbody tr").first.inner_text()
    navigate(page, lambda: page.click("a[href='/diff']"))
    navigate(page, lambda: page.click("form.controls button[type=submit]"))  # the two runs, oldest first
    change = page.locator('.effect[data-table="AvgAge"] li.changed').first
    assert (change.locator(".old").first.inner_text(), change.locator(".new").first.inner_text()) == ("35.0", "40.0")
    assert "because Person1.Age" in change.inner_text() and "40 → 50" in change.inner_text()
    screenshot(page, "12-diff")
