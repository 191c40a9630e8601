"""Before and after a refactor, side by side: capture_bench.py and paper_eval.py at 1x (a benchmark, not a test).

    python examples/benchmarks/layers_bench.py --before CHECKOUT --after CHECKOUT [--rounds 2] [--out examples/benchmarks/layers.md]

Each checkout is a tree of this repository with its own ``.venv`` (installed
with ``[beam,test,bench]``); every benchmark runs with that checkout's
interpreter, its own copy of the benchmark script and (for paper_eval) its
own ``--data`` folder, generated, imported and indexed by that checkout's
code. The two checkouts alternate within a round: the before checkout goes
first in odd rounds, the after one in even rounds (whatever runs second on a
loaded machine may find it warmer or busier).

Per round: ``capture_bench.py --runs R --warmup 1`` of each checkout (its
"All runs (s)" line parsed: every timed run of every configuration), and, in
the first ``--paper-rounds`` rounds, ``paper_eval.py --factors 1`` of each
checkout into a fresh data folder (``paper-eval-results.json`` read: import
and index wall seconds, the mean query seconds per direction, class and
method, RAM, disk and fresh-process). Figures are medians over every run of
every round; ratios are after/before. Behaviour is checked too: the triples
and row-lineage records each capture writes, and the index counts and the
queries paper_eval picks, must be the same before and after.

The report (``--out``) and the raw figures (``--raw``, outside the
repository by default) are rewritten after every benchmark, so an
interrupted run still leaves what it measured. ``--merge RAW`` adds this
run's figures to those of an earlier run of the same two commits (e.g. more
paper_eval rounds with ``--no-capture``); the report then covers every run.
Nothing reaches the network.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TREES = ("before", "after")
CAPTURE_SERIES = (
    "plain",
    "captured",
    "captured without row lineage",
    "captured with group joins",
    "captured without location lineage",
)
# In capture_bench's "All runs (s)" line, one series of a pipeline: its label and its runs as a Python list.
SERIES_PATTERN = re.compile(r"\s*(?P<label>[^\[\];]+?) \[(?P<runs>[^\]]*)\]")


class BenchError(Exception):
    """A benchmark child failed or wrote output this harness cannot read."""


@dataclass(frozen=True)
class Tree:
    label: str
    root: Path

    @property
    def python(self) -> Path:
        return self.root / ".venv" / "bin" / "python"

    def script(self, name: str) -> Path:
        return self.root / "examples" / "benchmarks" / name


# -- running a child --------------------------------------------------------------------


def child_env(tree: Tree) -> dict[str, str]:
    """The environment of a checkout's venv: its bin first, nothing of ours on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{tree.python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(tree.python.parent.parent)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(tree.python)
    return env


def run_child(tree: Tree, cmd: list[str], log: Path) -> float:
    """Run ``cmd`` in the checkout's root (its output to ``log``); its wall seconds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"[{time.strftime('%H:%M:%S')}] {tree.label}: {shlex.join(cmd)}", flush=True)
    with open(log, "w") as out:
        t0 = time.perf_counter()
        done = subprocess.run(
            cmd,
            cwd=tree.root,
            env=child_env(tree),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise BenchError(f"{tree.label} failed ({done.returncode}) after {wall:.0f} s: {shlex.join(cmd)} (see {log})")
    print(f"[{time.strftime('%H:%M:%S')}] {tree.label}: done in {wall:.0f} s", flush=True)
    return wall


# -- capture_bench ----------------------------------------------------------------------


def capture_cmd(tree: Tree, args: argparse.Namespace, out: Path) -> list[str]:
    return [
        str(tree.python),
        str(tree.script("capture_bench.py")),
        "--runs",
        str(args.capture_runs),
        "--warmup",
        "1",
        *(["--only", args.capture_only] if args.capture_only else []),
        "--out",
        str(out),
    ]


def parse_capture(text: str) -> dict[str, dict[str, Any]]:
    """Per pipeline: every run of each series (from "All runs (s)") and the
    triples and row-lineage records of the main table."""
    line = next((ln for ln in text.splitlines() if ln.startswith("All runs (s): ")), None)
    if line is None:
        raise BenchError("capture_bench's report has no 'All runs (s):' line")
    pipelines: dict[str, dict[str, Any]] = {}
    for chunk in line.removeprefix("All runs (s): ").split("; "):
        series = {
            m["label"]: [float(x) for x in m["runs"].split(",") if x.strip()] for m in SERIES_PATTERN.finditer(chunk)
        }
        first = next(iter(series), "")
        if not first.endswith(" plain"):
            raise BenchError(f"cannot parse capture_bench's runs line at: {chunk[:120]}")
        series["plain"] = series.pop(first)
        pipelines[first.removesuffix(" plain")] = {"runs": series}
    if not pipelines:
        raise BenchError(f"cannot parse capture_bench's runs line: {line[:200]}")
    add_written_counts(text, pipelines)
    return pipelines


def table_cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def add_written_counts(text: str, pipelines: dict[str, dict[str, Any]]) -> None:
    """The triples and row-lineage records of each pipeline, from the first table with those columns."""
    rows = text.splitlines()
    head = next((i for i, r in enumerate(rows) if r.startswith("| pipeline |") and "| triples |" in r), None)
    if head is None:
        return
    columns = table_cells(rows[head])
    for row in rows[head + 2 :]:
        if not row.startswith("|"):
            break
        cells = dict(zip(columns, table_cells(row), strict=False))
        for key, column in (("triples", "triples"), ("records", "row-lineage records")):
            if cells.get("pipeline") in pipelines and column in cells:
                pipelines[cells["pipeline"]][key] = int(cells[column].replace(",", ""))


def capture_once(tree: Tree, args: argparse.Namespace, work: Path, rnd: int) -> dict[str, Any]:
    out = work / f"capture-{tree.label}-r{rnd}.md"
    wall = run_child(tree, capture_cmd(tree, args, out), work / "logs" / f"capture-{tree.label}-r{rnd}.log")
    return {"wall": wall, "load": os.getloadavg(), "pipelines": parse_capture(out.read_text())}


# -- paper_eval -------------------------------------------------------------------------


def paper_cmd(tree: Tree, args: argparse.Namespace, data: Path, out: Path) -> list[str]:
    return [
        str(tree.python),
        str(tree.script("paper_eval.py")),
        "--factors",
        "1",
        "--data",
        str(data),
        "--queries",
        "3",
        "--slow-queries",
        "1",
        "--cli-queries",
        "1",
        "--runs",
        "3",
        "--driver-memory",
        "2g",
        *(["--scale", f"{args.paper_scale:g}"] if args.paper_scale != 1.0 else []),
        *(["--theta", str(args.paper_theta)] if args.paper_theta is not None else []),
        "--out",
        str(out),
    ]


def paper_figures(results: dict[str, Any]) -> dict[str, Any]:
    """Seconds by figure name (import, index, query means) and what must not change."""
    sec = results["factors"]["1"]
    state, bench = sec["state"], sec["bench"]
    figures: dict[str, float] = {
        "import wall (s)": sum(c["seconds"] or 0 for c in state["copies"]),
        "index wall (s)": state["index"]["wall"],
        "index, engine's own (s)": state["index"]["seconds"],
    }
    for variant in ("ram", "disk"):
        for direction, classes in bench[variant].items():
            for cls, methods in classes.items():
                for method, got in methods.items():
                    if got["times"]:
                        figures[f"{variant} {direction} {cls} {method} (s)"] = statistics.fmean(got["times"])
    for direction, classes in bench["cli"].items():
        for cls, times in classes.items():
            if times:
                figures[f"cli {direction} {cls} csprov (s)"] = statistics.fmean(times)
    same = {"index counts": sec["index"]["counts"], "queries": results["queries"]}
    return {"figures": figures, "same": same}


def paper_once(tree: Tree, args: argparse.Namespace, work: Path, rnd: int) -> dict[str, Any]:
    data = work / f"paper-{tree.label}-r{rnd}"
    shutil.rmtree(data, ignore_errors=True)  # a fresh store: import and index are measured, not reused
    out = work / f"paper-{tree.label}-r{rnd}.md"
    wall = run_child(tree, paper_cmd(tree, args, data, out), work / "logs" / f"paper-{tree.label}-r{rnd}.log")
    got = paper_figures(json.loads((data / "paper-eval-results.json").read_text()))
    if not args.keep_data:
        shutil.rmtree(data, ignore_errors=True)
    return {"wall": wall, "load": os.getloadavg(), **got}


# -- the rounds -------------------------------------------------------------------------


def order(rnd: int) -> tuple[str, str]:
    """The before checkout first in odd rounds, the after one in even rounds."""
    return TREES if rnd % 2 else TREES[::-1]


def measure(trees: dict[str, Tree], args: argparse.Namespace, work: Path, raw: dict[str, Any], save: Any) -> None:
    run = len(raw["runs"])
    capture_rounds = 0 if args.no_capture else args.rounds
    for rnd in range(1, args.rounds + 1):
        for kind, once, rounds in (("capture", capture_once, capture_rounds), ("paper", paper_once, args.paper_rounds)):
            if rnd > rounds:
                continue
            for label in order(rnd):
                step = once(trees[label], args, work, rnd)
                raw[kind].setdefault(label, []).append({"run": run, "round": rnd, **step})
                save()


def checkout_facts(tree: Tree) -> dict[str, Any]:
    def git(*a: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tree.root), *a], capture_output=True, text=True, check=True
        ).stdout.strip()

    changed = git("status", "--porcelain", "--untracked-files=no")
    return {
        "root": str(tree.root),
        "commit": git("rev-parse", "--short", "HEAD"),
        "subject": git("log", "-1", "--format=%s"),
        "modified_files": len(changed.splitlines()),
    }


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


# -- the report -------------------------------------------------------------------------


def median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def ratio_text(after: float | None, before: float | None) -> str:
    return f"{after / before:.3f}" if after is not None and before else "-"


def num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def capture_series(raw: dict[str, Any], label: str, pipeline: str, series: str) -> list[list[float]]:
    """Every run of ``series`` per round (one list per round)."""
    return [
        r["pipelines"][pipeline]["runs"][series]
        for r in raw["capture"].get(label, [])
        if series in r["pipelines"].get(pipeline, {}).get("runs", {})
    ]


def overhead_runs(raw: dict[str, Any], label: str, pipeline: str) -> list[float]:
    """captured/plain of each run (the two run back to back in one process)."""
    plain = capture_series(raw, label, pipeline, "plain")
    captured = capture_series(raw, label, pipeline, "captured")
    return [c / p for ps, cs in zip(plain, captured, strict=True) for p, c in zip(ps, cs, strict=True)]


def per_round_ratios(raw: dict[str, Any], pipeline: str, series: str) -> list[float]:
    """after/before of each round's medians (the two checkouts ran back to back)."""
    before = capture_series(raw, "before", pipeline, series)
    after = capture_series(raw, "after", pipeline, series)
    return [statistics.median(a) / statistics.median(b) for b, a in zip(before, after, strict=False)]


def capture_rows(raw: dict[str, Any]) -> list[str]:
    pipelines = list(dict.fromkeys(p for r in raw["capture"].get("before", []) for p in r["pipelines"]))
    rows = []
    for pipeline in pipelines:
        for series in CAPTURE_SERIES:
            b = median([x for rnd in capture_series(raw, "before", pipeline, series) for x in rnd])
            a = median([x for rnd in capture_series(raw, "after", pipeline, series) for x in rnd])
            per = ", ".join(f"{x:.3f}" for x in per_round_ratios(raw, pipeline, series))
            n = sum(len(rnd) for rnd in capture_series(raw, "before", pipeline, series))
            if not n:
                continue
            rows.append(f"| {pipeline} | {series} | {num(b)} | {num(a)} | {ratio_text(a, b)} | {per} | {n} |")
        b, a = median(overhead_runs(raw, "before", pipeline)), median(overhead_runs(raw, "after", pipeline))
        rows.append(
            f"| {pipeline} | captured / plain (per run) | {num(b, 3)}x | {num(a, 3)}x | {ratio_text(a, b)} | "
            f"| {len(overhead_runs(raw, 'before', pipeline))} |"
        )
    return rows


def capture_behaviour(raw: dict[str, Any]) -> list[str]:
    rows = []
    for label in TREES:
        for r in raw["capture"].get(label, []):
            for pipeline, got in r["pipelines"].items():
                rows.append(
                    f"| {label} | {r['round']} | {pipeline} | {got.get('triples', 0):,} | {got.get('records', 0):,} |"
                )
    return rows


def paper_rows(raw: dict[str, Any]) -> list[str]:
    names = list(dict.fromkeys(k for r in raw["paper"].get("before", []) for k in r["figures"]))
    rows = []
    for name in names:
        b = median([r["figures"][name] for r in raw["paper"].get("before", []) if name in r["figures"]])
        a = median([r["figures"][name] for r in raw["paper"].get("after", []) if name in r["figures"]])
        digits = 1 if "wall" in name or "engine" in name else 4
        pairs = zip(raw["paper"].get("before", []), raw["paper"].get("after", []), strict=False)
        per = ", ".join(ratio_text(y["figures"].get(name), x["figures"].get(name)) for x, y in pairs)
        rows.append(f"| {name} | {num(b, digits)} | {num(a, digits)} | {ratio_text(a, b)} | {per} |")
    return rows


def paper_same(raw: dict[str, Any]) -> str:
    before, after = raw["paper"].get("before", []), raw["paper"].get("after", [])
    if not before or not after:
        return "not measured yet"
    checks = [
        f"{what}: {'same' if all(r['same'][what] == before[0]['same'][what] for r in before + after) else 'DIFFERENT'}"
        for what in before[0]["same"]
    ]
    counts = before[0]["same"]["index counts"]
    return "; ".join(checks) + f" (index counts: {json.dumps(counts)})"


def step_lines(raw: dict[str, Any]) -> list[str]:
    lines = []
    for kind in ("capture", "paper"):
        for label in TREES:
            for r in raw[kind].get(label, []):
                load = ", ".join(f"{x:.1f}" for x in r["load"])
                lines.append(f"| {kind} | {r.get('run', 1)} | {r['round']} | {label} | {r['wall']:.0f} | {load} |")
    return sorted(lines, key=lambda ln: (ln.split("|")[1], int(ln.split("|")[2]), int(ln.split("|")[3])))


def run_lines(i: int, run: dict[str, Any]) -> list[str]:
    """A run's command, the commands it ran in each checkout's root and the machine's load."""
    return [
        f"Run {i}: {run['rounds']} round(s) of capture_bench"
        + (" (skipped: --no-capture)" if run.get("no_capture") else "")
        + f", paper_eval in the first {run['paper_rounds']}.",
        "",
        "```",
        run["command"],
        "# in each checkout X (its root the working directory, its .venv/bin/python), D a fresh folder:",
        *run["child_commands"],
        "```",
        "",
        f"- load at start: `{run['uptime_start']}`",
        f"- load at end: `{run.get('uptime_end', '(not finished)')}`",
        "",
    ]


def report(raw: dict[str, Any]) -> str:
    facts = raw["checkouts"]
    lines = [
        "# Before and after the package refactor (issue 24), side by side",
        "",
        "Written by `examples/benchmarks/layers_bench.py` (not a test)"
        + (
            ""
            if all(r.get("finished") for r in raw["runs"])
            else " — **partial: a run had not finished when this was written**"
        )
        + ".",
        "Runs (each merged into the figures below; `--merge` adds a run to the raw figures of earlier ones):",
        "",
        *[line for i, r in enumerate(raw["runs"], start=1) for line in run_lines(i, r)],
        "Checkouts measured (each with its own `.venv`, its own benchmark scripts and data):",
        "",
        *[
            f"- {label}: `{facts[label]['commit']}` {facts[label]['subject']} ({facts[label]['modified_files']} modified "
            f"tracked files)"
            for label in TREES
        ],
        "",
        f"Order: before first in odd rounds, after first in even rounds. Machine: {os.cpu_count()} cores shared "
        "with other jobs.",
        "",
        "## capture_bench.py",
        "",
        "Medians over every timed run of every round (seconds); ratio = after/before; per-round ratio = after/before "
        "of that round's medians (the two checkouts ran back to back).",
        "",
        "| pipeline | figure | before | after | ratio | per-round ratios | runs each |",
        "|---|---|---:|---:|---:|---|---:|",
        *capture_rows(raw),
        "",
        "What each capture wrote (must be equal before and after):",
        "",
        "| checkout | round | pipeline | triples | row-lineage records |",
        "|---|---:|---|---:|---:|",
        *capture_behaviour(raw),
        "",
        "## paper_eval.py --factors 1",
        "",
        "Import and index: wall seconds of the child process; queries: mean seconds over the class's queries "
        "(ram: warm, disk: caches dropped, cli: a fresh `provplug lineage` process). Medians over rounds; "
        "ratio = after/before; per-round ratio: after/before of the two runs back to back.",
        "",
        "| figure | before | after | ratio | per-round ratios |",
        "|---|---:|---:|---:|---|",
        *paper_rows(raw),
        "",
        f"Behaviour: {paper_same(raw)}.",
        "",
        "## Steps",
        "",
        "| benchmark | run | round | checkout | wall (s) | load after (1, 5, 15 min) |",
        "|---|---:|---:|---|---:|---|",
        *step_lines(raw),
        "",
    ]
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, required=True, help="checkout of the code before (with its .venv)")
    p.add_argument("--after", type=Path, required=True, help="checkout of the code after (with its .venv)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of capture_bench (each checkout once a round)")
    p.add_argument(
        "--paper-rounds", type=int, default=1, help="rounds (the first ones) that also run paper_eval; 0: none"
    )
    p.add_argument("--capture-runs", type=int, default=3, help="capture_bench --runs")
    p.add_argument("--capture-only", choices=("flights", "tpch"), default=None, help="capture_bench --only")
    p.add_argument("--paper-scale", type=float, default=1.0, help="paper_eval --scale (1.0: the 7M-triple trace)")
    p.add_argument(
        "--paper-theta",
        type=int,
        default=None,
        help="paper_eval --theta (default: its own, 25,000; "
        "a small --paper-scale needs a smaller one to have large components)",
    )
    p.add_argument("--work", type=Path, default=None, help="folder for data and logs (default: a fresh temporary one)")
    p.add_argument("--keep-data", action="store_true", help="keep paper_eval's data folders")
    p.add_argument("--no-capture", action="store_true", help="only paper_eval (in its --paper-rounds)")
    p.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="raw figures (JSON) of an earlier run of the same commits to add this run to",
    )
    p.add_argument("--out", type=Path, default=HERE / "layers.md")
    p.add_argument("--raw", type=Path, default=None, help="raw figures as JSON (default: WORK/layers.json)")
    args = p.parse_args(argv)
    for label in TREES:
        tree = Tree(label, getattr(args, label).resolve())
        if not tree.python.exists() or not tree.script("capture_bench.py").exists():
            p.error(f"--{label} {tree.root}: no .venv/bin/python or examples/benchmarks/capture_bench.py")
    if args.rounds < 1 or not 0 <= args.paper_rounds <= args.rounds:
        p.error("--rounds must be >= 1 and --paper-rounds between 0 and --rounds")
    return args


def shown(cmd: list[str]) -> str:
    """A child command as the report shows it (X: the checkout, run with its own venv's python)."""
    return shlex.join(cmd).replace("X/.venv/bin/python", "python")


def previous_raw(path: Path | None, checkouts: dict[str, Any]) -> dict[str, Any]:
    """The raw figures of earlier runs of the same two commits (``--merge``), or none."""
    if path is None:
        return {"runs": [], "checkouts": checkouts, "capture": {}, "paper": {}}
    raw: dict[str, Any] = json.loads(path.read_text())
    if "runs" not in raw:  # written before --merge existed: one run, its facts at the top
        keys = ("command", "child_commands", "rounds", "paper_rounds", "uptime_start", "uptime_end", "finished")
        raw["runs"] = [{k: raw.pop(k) for k in keys if k in raw}]
        for steps in (*raw["capture"].values(), *raw["paper"].values()):
            for step in steps:
                step.setdefault("run", 1)
    commits = {label: raw["checkouts"][label]["commit"] for label in TREES}
    if commits != {label: checkouts[label]["commit"] for label in TREES}:
        raise BenchError(f"--merge {path} measured other commits: {commits}")
    return raw


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    trees = {label: Tree(label, getattr(args, label).resolve()) for label in TREES}
    work = args.work or Path(tempfile.mkdtemp(prefix="provplug-layers-"))
    work.mkdir(parents=True, exist_ok=True)
    raw_path = args.raw or work / "layers.json"
    x = Tree("X", Path("X"))
    checkouts = {label: checkout_facts(tree) for label, tree in trees.items()}
    raw = previous_raw(args.merge, checkouts)
    raw["runs"].append(
        {
            "command": "python examples/benchmarks/layers_bench.py " + shlex.join(argv),
            "child_commands": [
                *([] if args.no_capture else [shown(capture_cmd(x, args, Path("D/capture.md")))]),
                *([shown(paper_cmd(x, args, Path("D"), Path("D/paper_eval.md")))] if args.paper_rounds else []),
            ],
            "rounds": args.rounds,
            "paper_rounds": args.paper_rounds,
            "no_capture": args.no_capture,
            "uptime_start": uptime(),
        }
    )

    def save() -> None:
        raw_path.write_text(json.dumps(raw, indent=1))
        args.out.write_text(report(raw))

    print(f"work folder: {work}; raw figures: {raw_path}", flush=True)
    save()
    try:
        measure(trees, args, work, raw, save)
        raw["runs"][-1]["finished"] = True
    finally:
        raw["runs"][-1]["uptime_end"] = uptime()
        save()
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except BenchError as e:
        raise SystemExit(f"layers_bench: {e}") from None
