"""One convention for every ``provplug`` command (issue 29; docs/cli.md): the
store first, --quiet and --verbose everywhere, --json where a command prints
a result, list options repeated, --where repeatable and joined with AND, one
JSON layout, a quiet exit on a closed pipe, --version, readable plain text."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from test_whatif_support import paper_store

import provplug.cli.main
from provplug.cli.main import CLOSED_PIPE, UsageError, build_parser
from provplug.cli.output import combined_where, json_text
from provplug.cli.reference import commands
from provplug.errors import LineageQueryError

COMMANDS = {name: parser for name, _, parser in commands(build_parser())}
NO_STORE = {"plugins"}  # lists the installed plugins: no store involved
NO_JSON = {  # their output is not a result record
    "demo": "a tutorial: a tree and a hint to read",
    "export": "its output is a file format (--format prov-json|prov-n|openlineage)",
    "graph": "its output is a picture or DOT (--format text|svg|html|dot)",
    "run": "stdout is the script's own",
    "ui": "it serves web pages (their JSON is the API under /api, the CLI's --json documents)",
}
# The shortest valid line of each command, split where its options go
# (`run`'s options come before SCRIPT).
HEAD = {
    "import": ["S", "--triples", "t.csv"],
    "export": ["S", "--format", "prov-json"],
    "show": ["S", "T"],
    "delete-run": ["S", "R"],
    "diff": ["S", "A", "B"],
    "depends": ["S", "1", "2"],
    "lineage": ["S", "T.C"],
    "metrics": ["F", "R"],
    "run": ["S"],
    "whatif": ["S", "--delete", "T"],
    "plugins": [],
}
TAIL = {"run": ["script.py"]}


def _line(name: str, *options: str) -> list[str]:
    return [name, *HEAD.get(name, ["S"]), *options, *TAIL.get(name, [])]


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not a.option_strings]


def _help(cli: Any, name: str) -> str:
    result = cli(name, "--help")
    assert result.code == 0, result
    return str(result.out)


def _help_section(text: str, title: str) -> list[str]:
    """The first word of each entry of a --help section (``positional arguments:``, ...)."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    entries = []
    for line in lines[start:]:
        if not line.strip():
            break
        if line.startswith("  ") and not line.startswith("   "):
            entries.append(line.split()[0].rstrip(","))
    return entries


# -- the store, --quiet, --verbose, --json: every command's --help ----------------------------


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_store_is_the_first_positional_argument(cli: Any, name: str) -> None:
    positionals = _help_section(_help(cli, name), "positional arguments:") if name not in NO_STORE else []
    if name in NO_STORE:
        assert all("STORE" not in (a.metavar or "") for a in COMMANDS[name]._actions)
        return
    assert positionals[0] in ("STORE", "FULL_STORE"), positionals
    assert _positionals(COMMANDS[name])[0].metavar in ("STORE", "FULL_STORE")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_quiet_and_verbose_and_json_where_it_prints_a_result(cli: Any, name: str) -> None:
    common = _help_section(_help(cli, name), "common options:")
    assert common == ["--quiet", "--verbose"], common
    args = build_parser().parse_args(_line(name, "--quiet"))
    assert (args.quiet, args.verbose) == (True, False)
    with pytest.raises(UsageError, match="not allowed with"):
        build_parser().parse_args(_line(name, "--quiet", "--verbose"))
    options = {s for a in COMMANDS[name]._actions for s in a.option_strings}
    assert ("--json" in options) == (name not in NO_JSON), name


def test_the_convention_covers_every_command() -> None:
    assert set(NO_JSON) | NO_STORE <= set(COMMANDS)
    assert {"lineage", "run", "stats", "whatif", "depends", "diff", "metrics", "export", "index"} <= set(COMMANDS)


# -- lists and --where ----------------------------------------------------------------------


def _list_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and isinstance(a, argparse._AppendAction)]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_list_options_are_repeated_never_one_value_with_many_parts(name: str) -> None:
    for action in COMMANDS[name]._actions:
        assert action.nargs not in ("+", "*") or not action.option_strings, action
        help_text = (action.help or "").lower()
        assert "comma-separated" not in help_text or "deprecated" in help_text, action
    for action in _list_options(COMMANDS[name]):
        option = action.option_strings[-1]
        args = build_parser().parse_args(_line(name, option, "1", option, "2"))
        expected = [1, 2] if action.type else ["1", "2"]
        assert getattr(args, action.dest)[-2:] == expected, (name, option)


def test_the_list_options_are_the_repeatable_ones() -> None:
    repeatable = {(n, a.option_strings[-1]) for n, p in COMMANDS.items() for a in _list_options(p)}
    assert {
        ("diff", "--key"),
        ("metrics", "--key"),
        ("lineage", "--value-id"),
        ("export", "--value-id"),
        ("run", "--reduce"),
        ("lineage", "--zoom-out"),
        ("whatif", "--value-id"),
    } <= repeatable


def _where_options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s.endswith("where")]


@pytest.mark.parametrize("name", sorted(n for n, p in COMMANDS.items() if _where_options(p)))
def test_every_where_is_repeatable(name: str) -> None:
    for option in _where_options(COMMANDS[name]):
        args = build_parser().parse_args(_line(name, option, "a = 1", option, "b = 2"))
        values = args.deletions[-1][1] if name == "whatif" else getattr(args, option.lstrip("-").replace("-", "_"))
        assert values == ["a = 1", "b = 2"], (name, option, values)


def test_where_commands_are_the_expected_ones() -> None:
    assert {n for n, p in COMMANDS.items() if _where_options(p)} >= {"lineage", "export", "diff", "whatif", "depends"}


def test_predicates_are_joined_with_and_each_in_parentheses() -> None:
    assert combined_where(None) is None and combined_where([]) is None
    assert combined_where(["City = 'NY'"]) == "City = 'NY'"  # one: as written, errors quote it as given
    assert combined_where(["a = 1 OR b = 2", "c = 3"]) == "(a = 1 OR b = 2) AND (c = 3)"
    assert combined_where(["Name = ')'", "x = 1 -- ) a comment"]) == "(Name = ')') AND (x = 1 -- ) a comment\n)"


@pytest.mark.parametrize("predicate", ["a = 1) OR (b = 2", "(a = 1", "Name = 'x", "a = 1 /* c"])
def test_a_predicate_that_would_reach_across_the_join_is_refused(predicate: str) -> None:
    with pytest.raises(LineageQueryError, match="cannot be joined"):
        combined_where([predicate, "c = 3"])


def _cells(out: str) -> set[tuple[str, Any]]:
    return {(c["table"], c["value"]) for c in json.loads(out)["query"]}


def test_lineage_with_two_wheres_traces_the_rows_where_both_hold(paper_rows_store: Any, cli: Any) -> None:
    store, _ = paper_rows_store
    ny = cli("lineage", store, "Person1.Age", "--where", "City = 'NY'", "--json")
    both = cli("lineage", store, "Person1.Age", "--where", "City = 'NY'", "--where", "Age > 25", "--json")
    assert ny.code == both.code == 0, (ny, both)
    assert _cells(ny.out) == {("Person1", 30), ("Person1", 40), ("Person1", 20)}
    assert _cells(both.out) == {("Person1", 30), ("Person1", 40)}
    commented = cli(
        "lineage", store, "Person1.Age", "--where", "City = 'NY' -- a comment", "--where", "Age > 25", "--json"
    )
    assert _cells(commented.out) == _cells(both.out), commented


def test_export_with_two_wheres_exports_what_their_and_exports(paper_rows_store: Any, cli: Any) -> None:
    store, _ = paper_rows_store
    common = ("export", store, "Person1.Age", "--format", "prov-json")
    two = cli(*common, "--where", "City = 'NY'", "--where", "Age > 35")
    one = cli(*common, "--where", "City = 'NY' AND Age > 35")
    everything = cli(*common, "--where", "City = 'NY'")
    assert two.code == one.code == 0, (two, one)
    assert json.loads(two.out) == json.loads(one.out) != json.loads(everything.out)


@pytest.fixture
def people(tmp_path: Path) -> Path:
    path = tmp_path / "whatif.prov"  # not paper_rows_store's people.prov
    paper_store(path)
    return path


def test_whatif_and_depends_join_repeated_wheres_with_and(people: Path, cli: Any) -> None:
    two = cli("whatif", people, "--delete", "Person1", "--where", "City = 'NY'", "--where", "Age > 35", "--json")
    one = cli("whatif", people, "--delete", "Person1", "--where", "City = 'NY' AND Age > 35", "--json")
    assert two.code == one.code == 0 and _answer(two.out) == _answer(one.out), (two, one)
    assert _answer(two.out) != _answer(
        cli("whatif", people, "--delete", "Person1", "--where", "City = 'NY'", "--json").out
    )
    depends = ("depends", people, "Person1.Age", "AvgAge.Age", "--b-where", "City = 'NY'", "--json")
    two = cli(*depends, "--a-where", "City = 'NY'", "--a-where", "Name = 'Mary'")
    one = cli(*depends, "--a-where", "City = 'NY' AND Name = 'Mary'")
    assert two.code == one.code == 0 and _answer(two.out) == _answer(one.out), (two, one)
    assert json.loads(two.out)["answer"] == "no"  # Mary is filtered out by R1: not Steve's or Mark's "yes"


def _answer(out: str) -> dict[str, Any]:
    """A JSON answer without its measurements (timings differ between two runs)."""
    answer: dict[str, Any] = json.loads(out)
    answer.pop("stats", None)
    return answer


# -- one JSON layout ----------------------------------------------------------------------


def test_the_json_layout_has_a_record_per_line() -> None:
    data = {"n": 1, "rows": [{"a": [1, 2]}, {"a": []}], "stats": {"x": float("nan")}, "empty": []}
    assert json_text(data) == (
        '{\n  "n": 1,\n  "rows": [\n    {"a": [1, 2]},\n    {"a": []}\n  ],\n'
        '  "stats": {\n    "x": null\n  },\n  "empty": []\n}'
    )
    assert json_text([{"a": {"b": 1}}, 2]) == '[\n  {"a": {"b": 1}},\n  2\n]'


def _in_the_layout(result: Any) -> None:
    assert result.code == 0, result
    assert result.out == json_text(json.loads(result.out)) + "\n", result.out


def test_every_json_output_has_the_one_layout(paper_rows_store: Any, people: Path, cli: Any, tmp_path: Path) -> None:
    store, _ = paper_rows_store
    for line in (
        ["stats", store],
        ["runs", store],
        ["tables", store],
        ["show", store, "Person1"],
        ["gc", store, "--dry-run"],
        ["lineage", store, "AvgAge.Age", "--where", "City = 'NY'"],
        ["lineage", store, "AvgAge.Age", "--where", "City = 'NY'", "--summary"],
        ["plugins"],
        ["whatif", people, "--delete", "Person1", "--where", "Name = 'Mark'"],
        ["depends", people, "Person1.Age", "AvgAge.Age", "--a-where", "Name = 'Mark'"],
        ["index", people, "--local"],
    ):
        _in_the_layout(cli(*line, "--json"))
    _in_the_layout(cli("lineage", store, "AvgAge.Age", "--where", "City = 'NY'", "--format", "json"))
    run_id = json.loads(cli("runs", people, "--json").out)[0]["run_id"]
    _in_the_layout(cli("delete-run", people, run_id, "--json"))


# -- closed pipes, --version, --quiet, --verbose ------------------------------------------------


def _into_a_closed_pipe(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``provplug ARGS`` with stdout a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "provplug", *map(os.fspath, args)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_output_into_a_closed_pipe_stops_quietly(paper_rows_store: Any, json_flag: list[str]) -> None:
    store, _ = paper_rows_store
    result = _into_a_closed_pipe("tables", store, *json_flag)
    assert (result.returncode, result.stderr) == (CLOSED_PIPE, b""), result
    result = _into_a_closed_pipe("lineage", "--help")
    assert (result.returncode, result.stderr) == (0, b""), result  # argparse's own help: quiet, and done


def test_version_is_the_installed_distributions(cli: Any) -> None:
    result = cli("--version")
    assert (result.code, result.out) == (0, f"provplug {version('provplug')}\n"), result


def test_quiet_leaves_out_progress_and_notes(paper_rows_store: Any, cli: Any, tmp_path: Path) -> None:
    store, _ = paper_rows_store
    query = ("lineage", store, "AvgAge.Age", "--where", "City = 'NY'", "--json", "-o")
    loud = cli(*query, tmp_path / "a.json")
    quiet = cli(*query, tmp_path / "b.json", "--quiet")
    assert loud.err.startswith("wrote ") and quiet.err == "", (loud, quiet)
    assert _answer((tmp_path / "a.json").read_text()) == _answer((tmp_path / "b.json").read_text())
    assert "[provplug]" in cli("index", store, "--local").err
    assert cli("index", store, "--local", "--quiet").err == ""


def test_verbose_shows_provplug_info_logs_for_that_command_only(
    paper_rows_store: Any, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = paper_rows_store
    stats = provplug.cli.stats._cmd_stats

    def logging_stats(args: argparse.Namespace) -> int:
        logging.getLogger("provplug.explore").info("counting %s", "runs")
        return stats(args)

    monkeypatch.setattr(provplug.cli.stats, "_cmd_stats", logging_stats)
    assert "provplug: provplug.explore: counting runs" in cli("stats", store, "--verbose").err
    assert "counting runs" not in cli("stats", store).err
    assert logging.getLogger("provplug").handlers == []


# -- plain text ---------------------------------------------------------------------------------


def test_stats_text_has_no_json(paper_rows_store: Any, cli: Any) -> None:
    store, _ = paper_rows_store
    out = cli("stats", store).out
    assert "splits" in out and not any(c in out for c in '[{"'), out


def test_stats_lists_of_records_are_tables() -> None:
    text = provplug.cli.stats._plain(
        "per_split",
        [
            {"ccid": 7, "component_nodes": 31_000, "split": "sp1", "sets": 4, "sets_ge_1000": 2, "largest_set": 9000},
            {"ccid": 7, "component_nodes": 31_000, "split": None, "sets": 1, "sets_ge_1000": 0, "largest_set": 12},
        ],
    )
    assert text.splitlines()[1:] == [
        "  CCID  COMPONENT_NODES  SPLIT  SETS  SETS_GE_1000  LARGEST_SET",
        "     7           31,000  sp1       4             2        9,000",
        "     7           31,000  -         1             0           12",
    ]
    assert provplug.cli.stats._plain("splits", [["A"], [["B"], ["C", "D"]]]) == "A\n" + " " * 19 + "(B) | (C, D)"
    assert provplug.cli.stats._plain("reduced_runs", [{"run_id": "r", "params": {"ratio": 0.5}}]).endswith(
        "r       ratio=0.5"
    )


# -- run: STORE first, --store still accepted -----------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (["S", "x.py", "--no-rows", "1"], ("S", ["x.py", "--no-rows", "1"], False)),
        (["S", "--no-rows", "x.py", "-a"], ("S", ["x.py", "-a"], True)),
        (["--no-rows", "S", "x.py"], ("S", ["x.py"], True)),
        (["S", "--", "x.py", "-1"], ("S", ["x.py", "-1"], False)),
    ],
)
def test_run_takes_the_store_first_and_its_options_before_the_script(line: list[str], expected: Any) -> None:
    from provplug.cli.run import _store_script_args

    args = build_parser().parse_args(["run", *line])
    store, script, script_args = _store_script_args(args)
    assert (store, [script, *script_args], args.no_rows) == expected


def test_run_still_accepts_the_deprecated_store_option() -> None:
    from provplug.cli.run import _store_script_args

    args = build_parser().parse_args(["run", "--store", "S", "--no-rows", "x.py", "--store", "q"])
    assert (*_store_script_args(args), args.no_rows) == ("S", "x.py", ["--store", "q"], True)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (["S"], "SCRIPT is missing"),
        (["S", "--store", "T", "x.py"], "give the store once"),
    ],
)
def test_run_without_a_script_or_with_two_stores_is_a_usage_error(line: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build_parser().parse_args(["run", *line])


def test_run_passes_the_scripts_arguments_in_either_form(tmp_path: Path, cli: Any) -> None:
    script = tmp_path / "echo.py"
    script.write_text("import sys\nprint(' '.join(sys.argv[1:]))\n")
    new = cli("run", tmp_path / "a.prov", "--no-rows", script, "--json", "-x")
    old = cli("run", "--store", tmp_path / "b.prov", script, "--json", "-x")
    assert new.code == old.code == 0 and new.out == old.out == "--json -x\n", (new, old)
    assert "wrote no DataFrame" in new.err
