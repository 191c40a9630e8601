"""The records example adapter (examples/records_adapter) passes provplug.testing's
contract, installed the way ``pip install`` would install it (an entry point in
the ``provplug`` group), and its black-box triples are the oracle's."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from test_plugins import RECORDS_SRC, install_entry_point

import provplug
from provplug.plugin.manager import Plugins
from provplug.testing import AdapterContract, StoreContents, expect, keyed


@pytest.fixture(scope="module", autouse=True)
def records_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """provplug-records installed for this module: its metadata on sys.path, its source importable."""
    site = tmp_path_factory.mktemp("site")
    install_entry_point(site, "provplug-records", "records", "provplug_records")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(RECORDS_SRC))
        patch.syspath_prepend(str(site))
        yield


# -- the example of docs/testing.md (keep them identical) -- begin
PEOPLE = [{"name": "ann", "city": "ny"}, {"name": "bo", "city": "la"}, {"name": "cy", "city": "ny"}]


@provplug.step("Upper", output="Shouting")
def upper(people: Any) -> list[dict[str, str]]:
    return [{k: v.upper() for k, v in row.items()} for row in people.rows]


@provplug.step("Broken", output="Never")
def broken(people: Any) -> list[dict[str, str]]:
    raise RuntimeError("broken step")


class TestRecordsContract(AdapterContract):
    adapter_name = "records"
    dense_rows = True  # rows are numbered by position
    failure = RuntimeError

    @pytest.fixture(scope="class")
    @classmethod
    def new_engine(cls) -> Callable[[], object]:
        from provplug_records import RecordsEngine

        return RecordsEngine

    def pipeline(self, run: Any) -> Mapping[str, Any]:
        return {"Shouting": upper(run.source(PEOPLE, "People"))}

    def produced(self, outputs: Mapping[str, Any]) -> Mapping[str, list[dict[str, Any]]]:
        return {name: out.rows for name, out in outputs.items()}

    def failing_pipeline(self, run: Any) -> None:
        broken(upper(run.source(PEOPLE, "People")))


# -- the example of docs/testing.md -- end


def test_the_documented_example_is_this_module() -> None:
    """docs/testing.md shows the example above, as it is here (so the doc's code runs)."""
    text = Path(__file__).read_text()
    example = text.split("-- begin\n", 1)[1].split("# -- the example of docs/testing.md -- end", 1)[0]
    doc = (Path(__file__).parent.parent / "docs" / "testing.md").read_text()
    assert f"```python\n{example}```" in doc


def test_black_box_triples_are_row_for_row(tmp_path: Path) -> None:
    """Every output cell of row i <- every input cell of row i (by hand, labelled by name)."""
    from provplug_records import RecordsEngine

    store = tmp_path / "records.prov"
    with provplug.capture(RecordsEngine(), store=store, plugins=Plugins.load()) as run:
        upper(run.source(PEOPLE, "People"))
    keys = {"People": ["name"], "Shouting": ["#row"]}
    expected: set[Any] = set()
    for number, person in enumerate(PEOPLE):
        inputs = [("People", column, person["name"]) for column in person]
        expected |= expect("Upper", "Shouting", {(column, number): inputs for column in person})
    assert StoreContents(store).labelled_triples(keyed(keys)) == expected
