"""The explorer on a ~100,000-ancestor answer, measured in a real browser.

On the paper-shaped trace (``paper_trace.py``, indexed as ``query_bench.py``
does), the largest hubs together (as ``answer_size.py`` picks them) have
about 100,000 ancestors. The explorer (``provplug ui --port 0``, a new
process each round, as a user starts it) opens ``/lineage?value_id=...`` in Debian's Chromium driven by
Playwright; the page asks for the answer's summary and, the answer being
large, shows it summarised per table and column. Measured: the wall time
from navigation to the summary on screen (the query run by the server: cold
answer; then again with the answer in the server's cache: warm), and the
time from clicking "expand table" on the largest table to its first page of
cells on screen; beside them, ``provplug lineage ... --summary --json`` for
the same question in a new process. Writes ``ui.md`` beside this file.

    python examples/benchmarks/ui_bench.py [--scale 1.0] [--ancestors 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provplug  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def trace_question(scale: float, seed: int, ancestors: int) -> tuple[Path, list[int]]:
    from answer_size import hubs_reaching
    from query_bench import prepare

    path = HERE / "data" / f"query-trace-{scale:g}.prov"
    prepare(path, scale, seed, theta=25_000)
    return path, hubs_reaching(path, ancestors)


@contextmanager
def explorer(path: Path) -> Iterator[str]:
    """``provplug ui PATH --port 0`` in a process of its own (as a user starts it); yields its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "provplug", "ui", str(path), "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        found = re.search(r"at (http://\S+/) ", line)
        if found is None:
            raise RuntimeError(f"provplug ui did not start: {line}{server.stderr.read()}")
        yield found.group(1)
    finally:
        server.terminate()
        server.wait(30)


def cli_summary(path: Path, values: list[int]) -> float:
    """Seconds of ``provplug lineage PATH --value-id ... --summary --json``: the same question, a new process."""
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "provplug",
            "lineage",
            str(path),
            *(f"--value-id={v}" for v in values),
            "--summary",
            "--json",
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


QUERY_ALONE = """
import sys, time
import provplug
store = provplug.open(sys.argv[1])
started = time.perf_counter()
store.lineage(value_id=[int(v) for v in sys.argv[2:]])
print(time.perf_counter() - started)
"""


def query_alone(path: Path, values: list[int]) -> float:
    """Seconds of the lineage query alone, the first in a new process (what a
    cold open pays before any summary or page): store opened, clock started."""
    done = subprocess.run(
        [sys.executable, "-c", QUERY_ALONE, str(path), *map(str, values)], check=True, capture_output=True, text=True
    )
    return float(done.stdout.strip())


def open_summary(page: Any, url: str) -> float:
    """Seconds from navigation to the summary drawn."""
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("#summary .card", timeout=120_000)
    return time.perf_counter() - started


def expand_largest(page: Any) -> tuple[str, float, int]:
    """Expand the table with the most cells; seconds to its first page of cells on screen."""
    cards = page.query_selector_all("#summary .card")
    counts = [(int(c.query_selector(".muted").inner_text().split()[0].replace(",", "")), c) for c in cards]
    _, card = max(counts, key=lambda pair: pair[0])
    table = card.get_attribute("data-table")
    started = time.perf_counter()
    card.query_selector("button.expand").click()
    page.wait_for_selector(f'#summary .card[data-table="{table}"] table.slice tbody tr', timeout=120_000)
    seconds = time.perf_counter() - started
    rows = len(card.query_selector_all("table.slice tbody tr"))
    return table, seconds, rows


def measure(path: Path, values: list[int], rounds: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    answer = provplug.open(path).lineage(value_id=values)  # its size, and a warm store for the server's first query
    figures: dict[str, Any] = {
        "ancestors": len(answer.lineage),
        "triples": len(answer.edges),
        "queried": len(values),
        "cold": [],
        "warm": [],
        "expand": [],
        "page_ms": [],
        "query": [],
        "alone": [],
    }
    query = "&".join(f"value_id={v}" for v in values)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        for _ in range(rounds):
            with explorer(path) as url:  # a new server process: nothing cached
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                figures["cold"].append(open_summary(page, f"{url}lineage?{query}"))
                figures["warm"].append(open_summary(page, f"{url}lineage?{query}"))
                figures["page_ms"].append(int(page.evaluate("document.body.dataset.openedMs")))
                table, seconds, rows = expand_largest(page)
                figures["expand"].append(seconds)
                figures["expanded"] = (table, rows)
                page.close()
            figures["query"].append(cli_summary(path, values))
            figures["alone"].append(query_alone(path, values))
        browser.close()
    return figures


def report(figures: dict[str, Any], command: str, out: Path) -> str:
    med: Callable[[list[float]], float] = lambda xs: statistics.median(xs)  # noqa: E731
    table, rows = figures["expanded"]
    lines = [
        "# The explorer on a large answer (`ui_bench.py`)",
        "",
        f"Command: `{command}` (written by the script).",
        "",
        f"The answer: {figures['ancestors']:,} ancestors of {figures['queried']} queried values, "
        f"{figures['triples']:,} triples (the paper-shaped trace, the largest hubs together as `answer_size.py` picks them).",
        "The page opens it summarised per table and column (more than 1,500 cells); "
        f'"expand table" on the largest table ({table}) lists its first {rows} cells.',
        "Wall seconds in Chromium (headless, Playwright), median of "
        f"{len(figures['cold'])} rounds, each with a new `provplug ui` process:",
        "",
        "| step | median s | each round s |",
        "| --- | ---: | --- |",
        f"| open to the summary, query run by the server (cold answer) | {med(figures['cold']):.2f} | "
        + ", ".join(f"{x:.2f}" for x in figures["cold"])
        + " |",
        f"| open to the summary, answer in the server's cache (warm) | {med(figures['warm']):.2f} | "
        + ", ".join(f"{x:.2f}" for x in figures["warm"])
        + " |",
        f"| the same question on the command line (`provplug lineage ... --summary --json`, a new process) | "
        f"{med(figures['query']):.2f} | " + ", ".join(f"{x:.2f}" for x in figures["query"]) + " |",
        f"| the lineage query alone, first in a new process (`store.lineage`, no summary, no page) | "
        f"{med(figures['alone']):.2f} | " + ", ".join(f"{x:.2f}" for x in figures["alone"]) + " |",
        f"| expand the largest table to its first cells | {med(figures['expand']):.2f} | "
        + ", ".join(f"{x:.2f}" for x in figures["expand"])
        + " |",
        "",
        "Open times run from navigation to the summary cards drawn (page load, the summary request, drawing); "
        "a cold open is the server's first query (catalogue and index read cold) plus the summary of its answer "
        "(`LineageAnswer.summary`) plus the page, what the command line pays for the same summary; "
        "a warm open serves the summary document kept by the server. "
        "Opening a lineage page starts its summary on the server at once, so the query runs while the browser "
        "loads the page and its script. "
        "The page's own figure (script start to drawn, warm) was "
        + ", ".join(f"{x} ms" for x in figures["page_ms"])
        + ".",
        "",
    ]
    text = "\n".join(lines)
    out.write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--ancestors", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    path, values = trace_question(args.scale, args.seed, args.ancestors)
    figures = measure(path, values, args.rounds)
    command = "python examples/benchmarks/ui_bench.py" + (f" --scale {args.scale:g}" if args.scale != 1.0 else "")
    print(report(figures, command, HERE / "ui.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
