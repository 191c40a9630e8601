"""Pictures of lineage answers (and the page around them), laid out by
Graphviz through the ``graphviz`` package (``pip install 'provplug[export]'``
plus Graphviz's ``dot`` program).

An answer of at most ``max_cells`` cells is drawn cell by cell: a cluster per
table, a node per row showing the answer's cells with their values (queried
cells yellow, lineage cells blue, the row's other columns grey), a triple as
an arrow from cell to cell labelled with its op. A larger answer is
summarised: a node per table column with its cell and row counts, an arrow
per (column, column, op) with its triple count.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provplug.errors import PictureError as PictureError
from provplug.query.answer import LineageAnswer, Record, row_key

if TYPE_CHECKING:
    import graphviz

DEFAULT_MAX_CELLS = 2000
# Columns of a row shown around the answer's cells (the rest are elided).
MAX_CONTEXT_COLUMNS = 6
MAX_VALUE_CHARS = 40
PICTURE_FORMATS = ("svg", "html", "dot")
QUERY_COLOUR = "#fff2a8"
CELL_COLOUR = "#d6e9ff"
CONTEXT_COLOUR = "#f4f4f4"
FONT = "Helvetica"


def graphviz_module() -> Any:
    try:
        import graphviz
    except ImportError:
        raise PictureError("pictures need the graphviz Python package: pip install 'provplug[export]'") from None
    return graphviz


def new_digraph(title: str) -> graphviz.Digraph:
    gv = graphviz_module()
    graph = gv.Digraph(name="provplug")
    graph.attr(rankdir="LR", label=title, labelloc="t", fontname=FONT, fontsize="16")
    graph.attr("node", fontname=FONT, fontsize="11")
    graph.attr("edge", fontname=FONT, fontsize="10", color="#555555")
    return graph


def render(graph: graphviz.Digraph, fmt: str, title: str, legend: str) -> str:
    """``graph`` as ``dot`` source, an SVG, or a standalone HTML page."""
    if fmt == "dot":
        return str(graph.source)
    svg = to_svg(graph)
    if fmt == "svg":
        return svg
    if fmt == "html":
        return html_page(title, legend, svg)
    raise PictureError(f"unknown picture format {fmt!r} (use {', '.join(PICTURE_FORMATS)})")


def to_svg(graph: graphviz.Digraph) -> str:
    gv = graphviz_module()
    try:
        return str(graph.pipe(format="svg", encoding="utf-8"))
    except gv.ExecutableNotFound:
        raise PictureError(
            "pictures need Graphviz's dot program on PATH: install Graphviz (apt-get install graphviz)"
        ) from None
    except gv.CalledProcessError as exc:
        detail = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        raise PictureError(f"Graphviz failed: {detail[0] if detail else exc}") from None


def html_page(title: str, legend: str, svg: str) -> str:
    """A page with nothing external: title, legend and the SVG inline."""
    inline = re.sub(r"^.*?(?=<svg)", "", svg, count=1, flags=re.S)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        "<style>body{font-family:Helvetica,Arial,sans-serif;margin:1.5em}"
        ".legend{color:#333;max-width:60em}.legend span{padding:0 .4em;border:1px solid #999}"
        "svg{max-width:100%;height:auto}</style>\n</head>\n<body>\n"
        f'<h1>{html.escape(title)}</h1>\n<p class="legend">{legend}</p>\n{inline}\n</body>\n</html>\n'
    )


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def swatch(colour: str, text: str) -> str:
    return f'<span style="background:{colour}">{html.escape(text)}</span>'


ANSWER_LEGEND = (
    f"{swatch(QUERY_COLOUR, 'queried cell')} {swatch(CELL_COLOUR, 'cell of the answer')} "
    f"{swatch(CONTEXT_COLOUR, 'other column of the row')} — a box is one row of a table (grey frame); "
    "an arrow is a triple (from the cell it was derived from), labelled with its op."
)
SUMMARY_LEGEND = (
    "A box is one column of a table (grey frame) with the number of the answer's cells in it "
    "(queried cells yellow); an arrow links columns, labelled with its op and triple count."
)


# -- answers ---------------------------------------------------------------------
def answer_title(answer: LineageAnswer) -> str:
    word = "ancestors" if answer.direction == "up" else "descendants"
    queried = sorted({f"{q['table']}.{q['column']}" if q["column"] else str(q["table"]) for q in answer.query})
    shown = ", ".join(queried[:3]) + (f" and {len(queried) - 3} more" if len(queried) > 3 else "")
    return f"Lineage of {shown}: {len(answer.lineage):,} {word}, {len(answer.edges):,} triples"


def answer_picture(answer: LineageAnswer, fmt: str, max_cells: int = DEFAULT_MAX_CELLS, summarise: bool = False) -> str:
    """The picture of ``answer`` in ``fmt`` (svg, html or dot); summarised
    when it has more than ``max_cells`` cells or ``summarise`` is set."""
    if fmt not in PICTURE_FORMATS:
        raise PictureError(f"unknown picture format {fmt!r} (use {', '.join(PICTURE_FORMATS)})")
    title = answer_title(answer)
    cells = len(answer.query) + len(answer.lineage)
    if summarise or cells > max_cells:
        note = "" if summarise else f" (summarised: more than {max_cells:,} cells)"
        graph = summary_graph(answer, title + note)
        return render(graph, fmt, title + note, SUMMARY_LEGEND)
    return render(cell_graph(answer, title), fmt, title, ANSWER_LEGEND)


@dataclass
class _RowNode:
    """One drawn row: the answer's cells of a stored row (or one cell)."""

    name: str
    table: str
    row: dict[str, Any] | None
    cells: dict[str, Record] = field(default_factory=dict)  # column -> record
    queried: set[str] = field(default_factory=set)


def cell_graph(answer: LineageAnswer, title: str) -> graphviz.Digraph:
    nodes: dict[str, _RowNode] = {}
    port: dict[int, tuple[str, str]] = {}  # value id -> (node, port)
    queried = {q["value_id"] for q in answer.query}
    for record in [*answer.query, *answer.lineage]:
        key = row_key(record)
        name = f"r{key.replace(':', '_')}" if key is not None else f"v{record['value_id']}"
        node = nodes.setdefault(name, _RowNode(name, str(record["table"]), record.get("row")))
        column = record["column"] if record["column"] is not None else f"value {record['value_id']}"
        node.cells[column] = record
        if record["value_id"] in queried:
            node.queried.add(column)
        port[record["value_id"]] = (name, _port(column))
    graph = new_digraph(title)
    by_table: dict[str, list[_RowNode]] = defaultdict(list)
    for node in nodes.values():
        by_table[node.table].append(node)
    for i, (table, members) in enumerate(sorted(by_table.items())):
        with graph.subgraph(name=f"cluster_{i}") as cluster:
            cluster.attr(label=f"{table} ({plural(len(members), 'row')})", style="rounded", color="#999999")
            for node in members:
                cluster.node(node.name, label=_row_label(node), shape="plain")
    edges: dict[tuple[str, str, str, str, str], int] = defaultdict(int)
    for e in answer.edges:
        if e["src"] in port and e["dst"] in port:
            (sn, sp), (dn, dp) = port[e["src"]], port[e["dst"]]
            edges[(sn, sp, dn, dp, e["op"])] += 1
    for (sn, sp, dn, dp, op), n in edges.items():
        graph.edge(f"{sn}:{sp}", f"{dn}:{dp}", label=op if n == 1 else f"{op} x{n}")
    return graph


def _port(column: str) -> str:
    """A port name Graphviz accepts for any column name (and the same in every run)."""
    return "p" + column.encode().hex()


def _text(value: Any) -> str:
    text = str(value)
    return html.escape(text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…", quote=False)


def _row_label(node: _RowNode) -> str:
    """An HTML-like label: column names over values, the answer's cells coloured."""
    if node.row is None:
        column, record = next(iter(node.cells.items()))
        colour = QUERY_COLOUR if column in node.queried else CELL_COLOUR
        text = f"{record['column']}" if record["column"] is not None else f"{record['table']}"
        return (
            f'<<table border="0" cellborder="1" cellspacing="0"><tr><td port="{_port(column)}" '
            f'bgcolor="{colour}">{_text(text)}<br/><font point-size="9">value {record["value_id"]}</font></td></tr></table>>'
        )
    columns = list(node.row)
    context = [c for c in columns if c not in node.cells][:MAX_CONTEXT_COLUMNS]
    shown = [c for c in columns if c in node.cells or c in context]
    head, body = [], []
    for column in shown:
        colour = QUERY_COLOUR if column in node.queried else CELL_COLOUR if column in node.cells else CONTEXT_COLOUR
        value = node.cells[column]["value"] if column in node.cells else node.row[column]
        attrs = f'bgcolor="{colour}"' + (f' port="{_port(column)}"' if column in node.cells else "")
        head.append(f'<td bgcolor="{colour}"><font point-size="9">{_text(column)}</font></td>')
        body.append(f"<td {attrs}>{_text(value)}</td>")
    if len(shown) < len(columns):
        head.append('<td><font point-size="9">…</font></td>')
        body.append(f'<td><font point-size="9">{len(columns) - len(shown)} more</font></td>')
    return (
        f'<<table border="0" cellborder="1" cellspacing="0"><tr>{"".join(head)}</tr><tr>{"".join(body)}</tr></table>>'
    )


def summary_graph(answer: LineageAnswer, title: str) -> graphviz.Digraph:
    """A node per (table, column) of the answer (queried cells apart), an
    arrow per (column, column, op) with its triple count."""
    queried = {q["value_id"] for q in answer.query}
    where: dict[int, tuple[str, str, bool]] = {}
    counts: dict[tuple[str, str, bool], int] = defaultdict(int)
    rows: dict[tuple[str, str, bool], set[str]] = defaultdict(set)
    for record in [*answer.query, *answer.lineage]:
        column = record["column"] if record["column"] is not None else "(values)"
        key = (str(record["table"]), column, record["value_id"] in queried)
        where[record["value_id"]] = key
        counts[key] += 1
        rk = row_key(record)
        if rk is not None:
            rows[key].add(rk)
    names = {key: f"n{i}" for i, key in enumerate(sorted(counts))}
    graph = new_digraph(title)
    tables = sorted({k[0] for k in counts})
    for i, table in enumerate(tables):
        with graph.subgraph(name=f"cluster_{i}") as cluster:
            cells = sum(n for k, n in counts.items() if k[0] == table)
            cluster.attr(label=f"{table} ({cells:,} cells)", style="rounded", color="#999999")
            for key in (k for k in sorted(counts) if k[0] == table):
                text = f"{key[1]}\n{counts[key]:,} {'queried ' if key[2] else ''}cells"
                if rows[key]:
                    text += f"\nin {len(rows[key]):,} rows"
                colour = QUERY_COLOUR if key[2] else CELL_COLOUR
                cluster.node(names[key], label=text, shape="box", style="filled,rounded", fillcolor=colour)
    edges: dict[tuple[str, str, str], int] = defaultdict(int)
    for e in answer.edges:
        if e["src"] in where and e["dst"] in where:
            edges[(names[where[e["src"]]], names[where[e["dst"]]], e["op"])] += 1
    for (a, b, op), n in sorted(edges.items()):
        graph.edge(a, b, label=f"{op}\n{n:,} triples")
    return graph
