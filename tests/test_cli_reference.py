"""docs/cli.md's command reference is generated from the parsers and must be
regenerated when a parser changes (issue 24, issue 29)."""

from __future__ import annotations

from pathlib import Path

from provplug.cli.main import build_parser
from provplug.cli.reference import BEGIN, END, commands, main, reference, with_reference

# The repository's copy: the tests also run against an installed wheel, where
# provplug.cli.reference.DOC (beside the package) is not the checkout's docs/.
DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def test_the_doc_holds_the_reference_of_the_current_parsers() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert with_reference(doc, reference()) == doc, "docs/cli.md is stale: run python -m provplug.cli.reference"


def test_the_reference_names_every_command_and_every_option() -> None:
    text = reference()
    for name, _, parser in commands(build_parser()):
        assert f"### `provplug {name}`" in text
        for action in parser._actions:
            for option in set(action.option_strings) - {"-h", "--help"}:  # every command's help is left out
                assert option in text, (name, option)


def test_a_changed_parser_makes_the_doc_stale() -> None:
    parser = build_parser()
    dict(((n, p) for n, _, p in commands(parser)))["stats"].add_argument("--new-option", help="added")
    doc = DOC.read_text(encoding="utf-8")
    assert with_reference(doc, reference(parser)) != doc
    assert "--new-option" in reference(parser)


def test_check_fails_on_a_stale_copy_and_regenerating_fixes_it(tmp_path: Path) -> None:
    copy = tmp_path / "cli.md"
    copy.write_text(f"# CLI\n\n{BEGIN}\nold text\n{END}\n", encoding="utf-8")
    assert main([str(copy), "--check"]) == 1
    assert main([str(copy)]) == 0
    assert main([str(copy), "--check"]) == 0
    assert copy.read_text(encoding="utf-8").startswith("# CLI\n\n") and "old text" not in copy.read_text()
