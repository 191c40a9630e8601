"""The one output layer of the command line: how every command prints
answers (text or the one JSON layout), writes files (whole or not at all)
and notes on stderr, plus the argument helpers every command shares
(``--where`` joining, whole-number options). See docs/cli.md.

Nothing heavy is imported here at module level: command modules import it
to build their parsers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from provplug.errors import LineageQueryError
from provplug.plugin.protocols import Answer, PicturedAnswer

# -- the convention every command shares (docs/cli.md) ---------------------------------


def print_json(data: object) -> None:
    """Print ``data`` as every ``--json`` output is printed: :func:`json_text`."""
    print(json_text(data))


def json_text(data: object) -> str:
    """``data`` as the one JSON layout of the command line: valid JSON (NaN
    and infinities as null) with a record per line. A top-level list has an
    item per line; a top-level object has a member per line, and a member
    that is a list or object has an item per line, indented two more
    spaces. Anything deeper stays compact on its line: greppable, and a
    large answer is not mostly indentation."""
    from provplug.query.answer import finite

    return _json_lines(finite(data), 0, 2 if isinstance(data, dict) else 1)


def _json_lines(value: object, depth: int, levels: int) -> str:
    """``value`` with its items on lines of their own for ``levels`` levels."""
    if levels == 0 or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, allow_nan=False)
    pad = "  " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(str(k))}: {_json_lines(v, depth + 1, levels - 1)}" for k, v in value.items()]
        opening, closing = "{", "}"
    else:
        items = [pad + _json_lines(v, depth + 1, levels - 1) for v in value]
        opening, closing = "[", "]"
    return opening + "\n" + ",\n".join(items) + "\n" + "  " * depth + closing


def combined_where(predicates: Sequence[str] | None) -> str | None:
    """Repeated ``--where`` predicates as one: each in parentheses, joined
    with AND (one predicate stays as written, so errors quote it as given).
    A predicate whose parentheses do not pair up could reach across the
    join (``a) OR (b``), so it is refused."""
    if not predicates:
        return None
    if len(predicates) == 1:
        return predicates[0]
    for predicate in predicates:
        _check_parentheses(predicate)
    return " AND ".join(f"({_line_comment_ended(predicate)})" for predicate in predicates)


def _line_comment_ended(predicate: str) -> str:
    """``predicate``, with a line break after it if it may end in a ``--``
    comment (which would otherwise swallow the closing parenthesis)."""
    return f"{predicate}\n" if "--" in predicate else predicate


def _check_parentheses(predicate: str) -> None:
    """Refuse ``predicate`` unless its parentheses pair up outside quoted
    strings and comments, and its strings and block comments close."""
    depth, i, closed = 0, 0, True
    while i < len(predicate) and closed and depth >= 0:
        char, pair = predicate[i], predicate[i : i + 2]
        if char in "'\"":  # a doubled quote inside a string scans as two strings back to back
            end = predicate.find(char, i + 1)
            closed, i = end >= 0, end
        elif pair == "--":  # a line comment: to the end of the line (the join adds one)
            end = predicate.find("\n", i)
            i = len(predicate) if end < 0 else end
        elif pair == "/*":
            end = predicate.find("*/", i + 2)
            closed, i = end >= 0, end + 1
        elif char in "()":
            depth += 1 if char == "(" else -1
        i += 1
    if depth != 0 or not closed:
        raise LineageQueryError(
            f"--where {predicate!r}: its parentheses, quotes or comments do not close, so it cannot be "
            "joined with the other --where predicates (they are combined with AND)"
        )


def whole_number(minimum: int, unit: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``minimum`` (else a usage error)."""
    kind = "positive" if minimum == 1 else "non-negative" if minimum == 0 else f">= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a {kind} number of {unit}, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a {kind} number of {unit}, not {value}")
        return value

    return parse


def note(args: argparse.Namespace, text: str) -> None:
    """An informational line on stderr (what was written, what to run next),
    left out under --quiet."""
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)


def write_whole(path: str, data: str | bytes) -> None:
    """Write ``path`` through a file beside it and a rename: never half written."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".provplug-export-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_output(text: str, path: str | None, quiet: bool = False) -> None:
    """Print ``text``, or write it to ``path`` whole or not at all (and say
    so on stderr unless ``quiet``)."""
    if path is None:
        print(text)
        return
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    if not quiet:
        print(f"wrote {target} ({len(text.encode()):,} bytes)", file=sys.stderr)


# -- answers: the one way every command prints what it found ----------------------------


class Printed:
    """An answer given as its JSON document and its text (made only when
    printed): the :class:`~provplug.plugin.protocols.Answer` of a command
    whose result is a plain record (runs, stats, diff, ...)."""

    def __init__(self, document: object, text: str | Callable[[], str]) -> None:
        self.document, self._text = document, text

    def to_dict(self) -> object:
        return self.document

    def render(self) -> str:
        return self._text if isinstance(self._text, str) else self._text()


def answer_text(answer: Answer, fmt: str = "text", max_cells: int | None = None) -> str:
    """``answer`` as ``fmt``: ``text``, ``json`` (the one JSON layout), or a
    picture (``svg``, ``html``) of an answer that can be drawn."""
    if fmt == "json":
        return json_text(answer.to_dict())
    if fmt == "text":
        return answer.render()
    if not isinstance(answer, PicturedAnswer):  # a command offered a picture its answer cannot draw: a bug
        raise TypeError(f"a {type(answer).__name__} cannot be drawn as {fmt}")
    return answer.picture(fmt, max_cells)


def print_answer(answer: Answer, as_json: bool) -> None:
    """Print ``answer``: its JSON document with ``--json``, else its text."""
    print(answer_text(answer, "json" if as_json else "text"))


def emit(args: argparse.Namespace, data: object, text: str) -> int:
    """Print a plain record as JSON with --json, else ``text``."""
    print_answer(Printed(data, text), args.json)
    return 0


def size_text(n: int) -> str:
    """Bytes as people read them: 812 bytes, 14.2 KB, 3.1 MB (powers of 1,024)."""
    if n < 1024:
        return f"{n:,} bytes"
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            break
    return f"{value:.1f} {unit} ({n:,} bytes)"
