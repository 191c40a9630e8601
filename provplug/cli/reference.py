"""The command reference of ``docs/cli.md``, generated from the argparse
parsers, so that it cannot drift from them.

``python -m provplug.cli.reference`` rewrites the generated part of the doc
(between :data:`BEGIN` and :data:`END`); ``--check`` only says whether it is
current (exit code 1 if not). The text is built from the parsers' actions,
not from ``--help``, so it does not depend on the terminal width or on how
a Python version words its help.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

BEGIN = "<!-- BEGIN GENERATED REFERENCE (python -m provplug.cli.reference) -->"
END = "<!-- END GENERATED REFERENCE -->"
DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The reference of every command of ``parser`` (default: provplug's), in
    alphabetical order: synopsis, description, and a table of its arguments."""
    if parser is None:
        from provplug.cli.main import build_parser

        parser = build_parser()
    sections = [_section("provplug", "", parser)]
    sections += [_section(f"provplug {name}", summary, command) for name, summary, command in commands(parser)]
    return "\n\n".join(sections) + "\n"


def commands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line help, parser)`` of each sub-command, by name."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    return [(name, summaries.get(name, ""), command) for name, command in sorted(sub.choices.items())]


def _section(title: str, summary: str, parser: argparse.ArgumentParser) -> str:
    lines = [f"### `{title}`", ""]
    lines += [_sentence(summary), ""] if summary else []
    lines += ["```", _synopsis(title, parser), "```", ""]
    lines += [_sentence(parser.description), ""] if parser.description else []
    lines += ["| argument | meaning |", "| --- | --- |"]
    lines += [f"| {_cell(_name(a))} | {_cell(_meaning(a))} |" for a in parser._actions if _shown(a)]
    if parser.epilog:
        lines += ["", _sentence(parser.epilog)]
    return "\n".join(lines)


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(
        action, (argparse._HelpAction, argparse._SubParsersAction)
    )


def _synopsis(title: str, parser: argparse.ArgumentParser) -> str:
    """``TITLE POSITIONALS [OPTIONS]``; options before a positional that takes
    the rest of the line (``run STORE [OPTIONS] SCRIPT [ARGS]``)."""
    words = [title]
    has_options = any(a.option_strings and _shown(a) for a in parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words += ["[OPTIONS]"] if has_options else []
            return " ".join([*words, "COMMAND ..."])
        if action.option_strings or not _shown(action):
            continue
        if action.nargs == argparse.REMAINDER and has_options:
            words.append("[OPTIONS]")
            has_options = False
        words.append(f"[{_metavar(action)}]" if action.nargs in ("?", "*") else _metavar(action))
    return " ".join([*words, *(["[OPTIONS]"] if has_options else [])])


def _metavar(action: argparse.Action) -> str:
    if isinstance(action.metavar, str):
        return action.metavar
    return action.dest.upper()


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return _metavar(action)
    takes_value = action.nargs != 0
    suffix = f" {_metavar(action)}" if takes_value and action.choices is None else ""
    if takes_value and action.choices is not None:
        suffix = " {" + ",".join(str(c) for c in action.choices) + "}"
    return ", ".join(action.option_strings) + suffix


def _meaning(action: argparse.Action) -> str:
    text = _sentence(action.help or "")
    if action.required and action.option_strings:
        text = f"required. {text}"
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        text += " (repeatable)"
    return text


def _sentence(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def with_reference(doc: str, generated: str) -> str:
    """``doc`` with the text between its markers replaced by ``generated``."""
    if BEGIN not in doc or END not in doc:
        raise ValueError(f"the doc has no {BEGIN!r} ... {END!r} markers")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n\n{generated}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m provplug.cli.reference", description=__doc__)
    parser.add_argument("doc", nargs="?", type=Path, default=DOC, help=f"the doc to update (default: {DOC})")
    parser.add_argument("--check", action="store_true", help="change nothing; exit code 1 if the doc is stale")
    args = parser.parse_args(argv)
    current = args.doc.read_text(encoding="utf-8")
    wanted = with_reference(current, reference())
    if args.check:
        if current != wanted:
            print(f"{args.doc} is stale: run python -m provplug.cli.reference", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        args.doc.write_text(wanted, encoding="utf-8")
        print(f"updated {args.doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
