"""``provplug whatif STORE --delete T [--where P] ... [--value-id N ...]``:
the command line of :mod:`provplug.whatif` (heavy imports inside the command)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class _Delete(argparse.Action):
    """``--delete T``: a new deletion of table T (every row until a --where follows)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        namespace.deletions = [*(namespace.deletions or []), [values, None]]


class _Where(argparse.Action):
    """``--where P``: the rows of the last ``--delete`` table to delete
    (several: the rows where all hold)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        deletions: Sequence[list[Any]] = namespace.deletions or []
        if not deletions:
            parser.error("--where must follow the --delete TABLE whose rows it selects")
        deletions[-1][1] = [*(deletions[-1][1] or []), values]


def add_parser(sub: Any) -> None:
    from provplug.cli.output import whole_number

    p = sub.add_parser(
        "whatif",
        help="what if rows were deleted: rows that vanish, cells that change, per downstream table",
        description="Propagate the deletion of rows through the row lineage of the runs that read them: per "
        "downstream table, the rows that vanish, the cells that change (old -> new; recomputed for count, sum, "
        "avg, min, max and count-distinct, 'changed, value unknown' otherwise), the rows whose fate cannot be "
        "told and the number of untouched rows. Nothing is re-run; the store is only read.",
        epilog="Example: provplug whatif STORE --delete Person1 --where \"Name = 'Mark'\". --delete and "
        "--value-id may be repeated; each --where belongs to the --delete before it.",
    )
    p.add_argument("store", metavar="STORE")
    p.add_argument(
        "--delete",
        metavar="TABLE",
        action=_Delete,
        dest="deletions",
        default=[],
        help="delete rows of TABLE (all of them unless --where follows)",
    )
    p.add_argument(
        "--where",
        metavar="PREDICATE",
        action=_Where,
        help="the rows of the last --delete TABLE: an SQL boolean expression over its columns "
        "(repeatable: the rows where all hold)",
    )
    p.add_argument(
        "--value-id",
        metavar="N",
        type=whole_number(0, "a value id"),
        action="append",
        default=[],
        dest="value_ids",
        help="delete the row of the cell with value id N",
    )
    p.add_argument(
        "--run",
        metavar="RUN",
        help="the tables of run RUN: a number, latest, latest~N, a label or an "
        "id prefix (default: the latest run that wrote each table)",
    )
    p.add_argument(
        "--limit",
        metavar="N",
        type=whole_number(1, "rows"),
        default=10,
        help="rows listed per table and kind in the text (default 10; --json lists all)",
    )
    p.add_argument("--json", action="store_true", help="the answer as JSON")
    p.set_defaults(func=_cmd_whatif)


def _cmd_whatif(args: argparse.Namespace) -> int:
    from provplug.api import open as open_store
    from provplug.cli.output import Printed, combined_where, print_answer
    from provplug.store.runs import run_note
    from provplug.whatif.query import run_used

    store = open_store(args.store)
    deletions = [(table, combined_where(where)) for table, where in args.deletions]
    answer = store.whatif(deletions=deletions, value_id=args.value_ids, run=args.run)
    run = run_used(store, answer, args.run)

    def text() -> str:
        return "\n".join(line for line in (run_note(run), answer.render(args.limit)) if line)

    print_answer(Printed({**answer.to_dict(), "run": run}, text), args.json)
    return 0
