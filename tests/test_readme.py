"""Every block of the README and then of the docs/ pages it leads to (PAGES), in
order, run as written on a fresh copy of the repository's examples (what a
fresh clone holds), and the output compared where a page shows it. The pages
share one session: a page's blocks may use the stores the README's tour made.

Each fenced block is one of:

* a ``bash`` block: run by bash (``set -e -o pipefail``) in the directory the
  previous block ended in, with the variables earlier blocks set;
* a ``python`` block: a complete program, run as ``python3 FILE`` (FILE is
  named by a ``<!-- file: NAME -->`` line before the block, else a scratch
  file outside the working directory);
* a block whose lines start with ``$ ``: those commands are run and every
  other line is what the command before it prints (``…`` stands for any text,
  ``$NAME`` for a variable an earlier block set);
* marked by an HTML comment on the line before it: ``<!-- output -->`` (what
  the previous block printed, compared the same way), ``<!-- fragment -->``
  (not a complete program: a synopsis or part of a script; skipped) or
  ``<!-- not-run: REASON -->`` (a complete command this test does not run;
  REASON names the file that runs it, which is checked: "FILE runs this
  command" (each ``&&``-joined command starts a line of FILE) or, for a
  server, "a server that runs until stopped ...; FILE serves it" (FILE calls
  each of its ``provplug`` commands, and its install lines are checked).

A block that is none of these fails the test. ``python3 -m pip install ...``
is the one command not executed: it stands for installing this checkout, so
the test checks instead that the distribution and every requirement of the
named extras are installed (no network, no change to the environment).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, REPO, explore_every_way

README = (REPO / "README.md").read_text()
# The pages whose blocks are run, in this order, after the README's (docs/cli.md is generated
# from the parsers and checked by test_cli_reference; ui.md and testing.md show no tour commands).
PAGES = (
    "README.md",
    "docs/capturing.md",
    "docs/queries.md",
    "docs/runs.md",
    "docs/export.md",
    "docs/capture-semantics.md",
    "docs/store-format.md",
    "docs/plugins.md",
    "docs/architecture.md",
    "docs/configuration.md",
    "docs/references.md",
    "docs/benchmarks.md",
)
NOT_RUN_PAGES = {"docs/cli.md", "docs/ui.md", "docs/testing.md"}
MARKER = re.compile(r"<!--\s*(.*?)\s*-->")
BLOCK_TIMEOUT = 900  # seconds for one block (a Spark or Kedro run on a loaded 2-core machine)
NOT_RUN_REASON = re.compile(r"(\S+) runs this command")
NOT_RUN_SERVER = re.compile(r"a server that runs until stopped.*; (\S+) serves it")


@dataclasses.dataclass(frozen=True)
class Block:
    line: int  # the line of its opening fence (1-based)
    lang: str
    text: str
    marker: str  # the HTML comment just before it ("" if none)
    page: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.page} block at line {self.line}"

    @property
    def kind(self) -> str:
        if self.marker in ("fragment", "output") or self.marker.startswith("not-run:"):
            return self.marker.split(":")[0]
        if self.lang in ("bash", "python"):
            return self.lang
        if self.lang == "" and self.text.startswith("$ "):
            return "session"
        return "unmarked"


def readme_blocks(text: str = README, page: str = "README.md") -> list[Block]:
    """Every fenced block of ``text`` with the marker comment on the last non-blank line before it."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^```(\w*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.fullmatch(before.strip())
        blocks.append(
            Block(
                i + 1, opening.group(1), "\n".join(lines[i + 1 : end]) + "\n", marker.group(1) if marker else "", page
            )
        )
        i = end + 1
    return blocks


def page_blocks() -> list[Block]:
    """Every block of every page of PAGES, in the order they are run."""
    return [b for page in PAGES for b in readme_blocks((REPO / page).read_text(), page)]


# -- comparing output ---------------------------------------------------------------------------------
def _line_pattern(line: str, variables: dict[str, str]) -> re.Pattern[str]:
    line = re.sub(r"\$([A-Z_][A-Z0-9_]*)", lambda m: variables.get(m.group(1), m.group(0)), line.rstrip())
    return re.compile(".*".join(re.escape(part) for part in line.split("…")))


def assert_shows(expected: str, printed: str, variables: dict[str, str], where: str) -> None:
    """``expected``'s lines appear, one after the other, among ``printed``'s."""
    want = [_line_pattern(line, variables) for line in expected.strip("\n").splitlines()]
    got = [line.rstrip() for line in printed.splitlines()]
    for start in range(len(got) - len(want) + 1):
        if all(p.fullmatch(got[start + k]) for k, p in enumerate(want)):
            return
    pytest.fail(f"{where} shows\n{expected}\nbut the command printed\n{printed}")


def test_the_comparison_needs_every_line_in_order_with_ellipses_and_variables() -> None:
    printed = "header\nruns 1-a → 2-b\n  x = 35.0  (value 7; row City=NY)\nfooter\n"
    assert_shows("runs $A → $B\n  x = 35.0  (value …; row City=NY)\n", printed, {"A": "1-a", "B": "2-b"}, "t")
    for wrong in ("runs $B → $A\n", "  x = 35.0  (value 8; row City=NY)\n", "footer\nheader\n"):
        with pytest.raises(pytest.fail.Exception):
            assert_shows(wrong, printed, {"A": "1-a", "B": "2-b"}, "t")


# -- running blocks --------------------------------------------------------------------------------------
# `python3 -m pip install ...` checks the install instead (see the module docstring).
PIP_SHIM = """python3() {
  if [ "${1:-}" = "-m" ] && [ "${2:-}" = "pip" ] && [ "${3:-}" = "install" ]; then
    command python3 "$README_CHECK_INSTALLED" "${@:4}" >&2
  else
    command python3 "$@"
  fi
}
set -e -o pipefail
"""
CHECK_INSTALLED = '''"""Stand-in for `pip install -e '.[EXTRAS]'`: is provplug installed with EXTRAS' requirements?"""
import re
import sys
from importlib import metadata

from packaging.requirements import Requirement

def check(extras, seen):
    for text in metadata.requires("provplug") or []:
        req = Requirement(text)
        wanted = [e for e in extras if req.marker is None or req.marker.evaluate({"extra": e})]
        if req.marker is not None and not wanted and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name == "provplug":
            new = set(req.extras) - seen
            check(sorted(new), seen | new)
            continue
        version = metadata.version(req.name)
        if version not in req.specifier:
            sys.exit(f"{req.name} {version} does not satisfy {req}")

target = [a for a in sys.argv[1:] if not a.startswith("-")][-1]
extras = re.fullmatch(r"\\.(?:\\[(.*)\\])?", target)
if extras is None:
    sys.exit(f"the README installs {target!r}, not this checkout")
names = [e.strip() for e in (extras.group(1) or "").split(",") if e.strip()]
check(names, set(names))
print(f"provplug{target[1:]} is installed", file=sys.stderr)
'''


@dataclasses.dataclass
class Session:
    """A user's terminal: where they are and what they have set."""

    root: Path  # the fresh clone
    scratch: Path  # files of the test's own, outside the clone
    cwd: Path
    variables: dict[str, str]
    printed: dict[str, str] = dataclasses.field(default_factory=dict)  # block.where -> its stdout
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # where -> wall time (reported, never asserted)

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PROVPLUG_STORE"}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["README_CHECK_INSTALLED"] = str(self.scratch / "check_installed.py")
        return {**env, **self.variables}

    def bash(self, script: str, where: str) -> str:
        """Run ``script`` as the next thing typed; keep its directory and variables."""
        state = self.scratch / "state"
        epilogue = (
            f'\npwd > "{state}.pwd"\n'
            f'for v in $(compgen -v); do printf "%s=%s\\0" "$v" "${{!v}}"; done > "{state}.vars"\n'
        )
        done = self._run(["bash", "-c", PIP_SHIM + script + epilogue], where)
        self.cwd = Path((state.parent / "state.pwd").read_text().strip())
        for item in (state.parent / "state.vars").read_text().split("\0"):
            name, _, value = item.partition("=")
            if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and name not in SHELL_VARIABLES and os.environ.get(name) != value:
                self.variables[name] = value
        return done

    def python(self, source: str, name: str, where: str) -> str:
        path = self.cwd / name if name else self.scratch / f"block_{where.split()[-1]}.py"
        path.write_text(source)
        return self._run(["python3", name or str(path)], where)

    def typed(self, argv: list[str], where: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``argv`` run as the user types it (in ``cwd``, default where they are), whatever its exit."""
        env = self.environment()
        executable = shutil.which(argv[0], path=env["PATH"]) or argv[0]
        started = time.perf_counter()
        done = subprocess.run(
            [executable, *argv[1:]],
            cwd=cwd or self.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=False,
        )
        self.seconds[where] = self.seconds.get(where, 0.0) + time.perf_counter() - started
        return done

    def _run(self, argv: list[str], where: str) -> str:
        done = self.typed(argv, where)
        assert done.returncode == 0, (
            f"{where} failed (exit {done.returncode})\nstdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
        )
        return done.stdout


SHELL_VARIABLES = {
    "BASH",
    "BASHOPTS",
    "BASHPID",
    "BASH_ARGC",
    "BASH_ARGV",
    "BASH_LINENO",
    "BASH_SOURCE",
    "BASH_VERSINFO",
    "BASH_VERSION",
    "DIRSTACK",
    "EUID",
    "GROUPS",
    "HOSTNAME",
    "HOSTTYPE",
    "IFS",
    "LINENO",
    "MACHTYPE",
    "OLDPWD",
    "OPTERR",
    "OPTIND",
    "OSTYPE",
    "PIPESTATUS",
    "PPID",
    "PS4",
    "PWD",
    "RANDOM",
    "SECONDS",
    "SHELLOPTS",
    "SHLVL",
    "UID",
    "EPOCHREALTIME",
    "EPOCHSECONDS",
    "SRANDOM",
    "BASH_COMMAND",
    "BASH_SUBSHELL",
    "COLUMNS",
    "LINES",
    "HISTCMD",
    "README_CHECK_INSTALLED",
    "PATH",
}


def _session_commands(block: Block) -> Iterator[tuple[str, str]]:
    """(command, the lines shown after it) of a ``$ `` block."""
    command, shown = "", list[str]()
    for line in block.text.splitlines():
        if line.startswith("$ "):
            if command:
                yield command, "\n".join(shown)
            command, shown = line[2:], []
        else:
            shown.append(line)
    yield command, "\n".join(shown)


def fresh_clone(destination: Path) -> Path:
    """What a fresh clone holds of what the README uses: the examples, without anything a run made."""
    shutil.copytree(
        EXAMPLES,
        destination / "examples",
        ignore=shutil.ignore_patterns("__pycache__", "*.prov", "03_primary", "08_reporting", "09_provenance", "*.log"),
    )
    return destination


def run_readme(session: Session, blocks: list[Block]) -> None:
    """Every block in order (see the module docstring)."""
    previous = ""
    for block in blocks:
        where = block.where
        kind = block.kind
        if kind == "bash":
            previous = session.printed[where] = session.bash(block.text, where)
        elif kind == "python":
            name = block.marker[len("file:") :].strip() if block.marker.startswith("file:") else ""
            previous = session.printed[where] = session.python(block.text, name, where)
        elif kind == "session":
            for command, shown in _session_commands(block):
                printed = session.bash(command, where)
                assert_shows(shown, printed, session.variables, where)
                session.printed[where] = previous = printed
        elif kind == "output":
            assert_shows(block.text, previous, session.variables, where)
        elif kind == "unmarked":
            pytest.fail(
                f"{where} ({block.lang or 'no language'}) is neither run by this test nor "
                "marked <!-- fragment --> / <!-- output --> / <!-- not-run: REASON -->"
            )


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """The whole README, run once in a fresh clone."""
    root = fresh_clone(tmp_path_factory.mktemp("clone"))
    scratch = tmp_path_factory.mktemp("readme_scratch")
    (scratch / "check_installed.py").write_text(CHECK_INSTALLED)
    session = Session(root, scratch, root, {})
    run_readme(session, page_blocks())
    return session


def _printed(session: Session, first_line: str) -> str:
    """What the block that starts with ``first_line`` printed."""
    (block,) = [b for b in page_blocks() if b.text.startswith(first_line)]
    return session.printed[block.where]


# -- the tests -------------------------------------------------------------------------------------------
def test_every_block_is_run_or_marked() -> None:
    kinds = [b.kind for b in page_blocks()]
    assert "unmarked" not in kinds, [b for b in page_blocks() if b.kind == "unmarked"]
    assert {"bash", "python", "session", "output", "fragment"} <= set(kinds)
    # and the check itself catches an unmarked block
    with pytest.raises(pytest.fail.Exception, match="neither run"):
        run_readme(Session(Path("."), Path("."), Path("."), {}), readme_blocks("text\n\n```toml\n[x]\n```\n"))


def test_every_docs_page_is_run_or_named_as_not_run() -> None:
    """A new page under docs/ is added to PAGES (its blocks run) or, if it shows no tour commands,
    to NOT_RUN_PAGES: a page's examples cannot go unchecked by being forgotten here."""
    pages = {str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")}
    assert pages - NOT_RUN_PAGES <= set(PAGES), sorted(pages - NOT_RUN_PAGES - set(PAGES))
    assert all((REPO / page).is_file() for page in PAGES)


def test_blocks_not_run_are_run_by_the_file_their_reason_names(tmp_path: Path) -> None:
    not_run = [b for b in page_blocks() if b.kind == "not-run"]
    assert not_run, "the README's test command is run by .ci/run, not by this test"
    for block in not_run:
        if server := NOT_RUN_SERVER.search(block.marker):
            _check_served(block, REPO / server.group(1), tmp_path)
            continue
        reason = NOT_RUN_REASON.search(block.marker)
        assert reason, f"{block.where}: a not-run reason says which file runs it"
        runner_lines = [line.strip() for line in (REPO / reason.group(1)).read_text().splitlines()]
        for line in block.text.strip().splitlines():
            for command in (part.strip() for part in line.split("&&")):
                # the runner may add arguments (a seed), never change the command
                assert any(r == command or r.startswith(command + " ") for r in runner_lines), (
                    f"{reason.group(1)} does not run {command!r}"
                )


def _check_served(block: Block, test_file: Path, scratch: Path) -> None:
    """A server block: its install lines hold here, and ``test_file`` runs each of its provplug commands."""
    (scratch / "check_installed.py").write_text(CHECK_INSTALLED)
    session = Session(REPO, scratch, scratch, {})
    source = test_file.read_text()
    for line in block.text.strip().splitlines():
        if line.startswith("python3 -m pip install"):
            session.bash(line, block.where)
        else:
            subcommand = _split(line)[1]
            assert line.startswith("provplug ") and f'cli("{subcommand}"' in source, (
                f"{test_file.name} does not run `provplug {subcommand}` ({line!r})"
            )


def test_every_readme_block_runs_as_written_on_a_fresh_clone(readme_run: Session) -> None:
    """The walk itself (the fixture) ran every block and compared every shown output; here, what
    the README says in prose about some of them."""
    people = _printed(readme_run, "import provplug\nfrom provplug.sparksession")
    assert re.search(r"\|\s*NY\|\s*35\.0\|", people) and re.search(r"\|\s*LA\|\s*40\.0\|", people), people
    print("seconds per README block:", json.dumps({k: round(v, 1) for k, v in readme_run.seconds.items()}))
    tree = _printed(readme_run, "provplug index people.prov\n")
    assert "\nAvgAge.Age = 35.0" in tree and "Person1.Age = 40" in tree and "Shane" not in tree, tree
    kedro = _printed(readme_run, "python3 -m pip install -e '.[kedro]'")
    assert "price_by_location.avg_price = 2645.67" in kedro and "$3,200.0" not in kedro, kedro
    sales = _printed(readme_run, "provplug run sales.prov")
    assert "\nbig_regions.avg_order = 4.0" in sales and "6 ancestors (sources only)" in sales, sales
    beam = _printed(readme_run, "python3 examples/people_beam.py")
    assert "AvgAge.Age = 35.0" in beam and "Person1.Age = 30" in beam and "Mary" not in beam, beam
    imported = _printed(readme_run, "provplug import table4.prov")
    assert imported.startswith("imported 15 triples into table4.prov"), imported
    stats = json.loads(imported[imported.index("\n{") :])
    assert (stats["triples"], stats["tables"]) == (15, 3)  # the block's comment
    query = _printed(readme_run, 'import provplug\nanswer = provplug.open("people.prov")')
    assert "Person1.Age = 30" in query and "Person1.Age = 40" in query, query


def test_the_export_placeholders_name_this_run_and_new_yorks_average(readme_run: Session) -> None:
    """$RUN and $VALUE_ID come from this store: the latest run id `provplug runs` lists (the tour's
    second run, Steve aged 32) and NY's AvgAge.Age in it."""
    import provplug

    store = readme_run.root / "people.prov"
    runs = provplug.open_store(store).runs()
    assert len(runs) == 2 and readme_run.variables["RUN"] == runs[-1]["run_id"]
    answer = provplug.open(store).lineage(table="AvgAge", column="Age", where="City = 'NY'", run=runs[-1]["run_id"])
    (ny,) = answer.to_dict()["query"]
    assert readme_run.variables["VALUE_ID"] == str(ny["value_id"]) and ny["value"] == 36.0
    events = json.loads((readme_run.root / "events.json").read_text())
    assert {e["job"]["name"] for e in events} == {"R1", "R2"}


def test_depends_answers_no_for_mary(readme_run: Session, cli: Any) -> None:
    """'With Mary instead of Mark the answer is `no`': docs/queries.md's depends command with Mary."""
    pages = "\n".join((REPO / page).read_text() for page in PAGES)
    (command,) = re.findall(r"^\$ provplug (depends .*)$", pages, flags=re.M)
    argv = [a.replace("Mark", "Mary") for a in _split(command)]
    result = cli(*[str(readme_run.root / a) if a.endswith(".prov") else a for a in argv])
    assert result.code == 0 and result.out.startswith("no"), result


def test_the_script_capture_store_can_be_browsed_drawn_and_exported(readme_run: Session, cli: Any) -> None:
    found = explore_every_way(
        cli,
        readme_run.root / "sales.prov",
        "big_regions",
        "avg_order",
        "region = 'north'",
        {"write:enriched", "write:by_region", "write:big_regions"},
    )
    assert {t["name"] for t in found["tables"]} == {"orders", "customers", "enriched", "by_region", "big_regions"}


def test_the_demo_runs_again_replacing_only_its_own_store(
    readme_run: Session, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`provplug demo` typed a second time where the README ran it: it says it replaces the
    earlier demo's store and prints the same answer; a store that is not the demo's is refused
    and left as it was."""
    monkeypatch.chdir(readme_run.root)
    # Typed again as the README types it: its own process, so its own local Spark. In this
    # process the demo would share the suite's session (other shuffle settings: other row
    # numbers in the answer whenever a Spark test happened to run first).
    again = readme_run.typed(["python3", "-m", "provplug", "demo"], "the demo again", cwd=readme_run.root)
    assert again.returncode == 0, again
    assert "replacing provplug-demo.prov, the store of an earlier provplug demo" in again.stderr
    seconds = re.compile(r", [0-9.]+ s$", flags=re.M)  # the query's time, the one thing that may differ
    first = _printed(readme_run, "python3 -m pip install -e . && python3 -m provplug demo")
    assert seconds.sub("", again.stdout) == seconds.sub("", first) and "AvgAge.Age = 35.0" in again.stdout
    assert [r["kind"] for r in provplug_runs(readme_run.root / "provplug-demo.prov")] == ["capture"]
    other = tmp_path / "table4.prov"
    imported = cli("import", other, "--triples", EXAMPLES / "data" / "paper_table4_triples.csv")
    assert imported.code == 0, imported
    before = sorted(p.relative_to(other) for p in other.rglob("*"))
    refused = cli("demo", other)
    assert refused.code == 2 and "is not a store of an earlier provplug demo" in refused.err, refused
    assert sorted(p.relative_to(other) for p in other.rglob("*")) == before


def provplug_runs(store: Path) -> list[dict[str, Any]]:
    import provplug

    return provplug.open_store(store).runs()


def _split(command: str) -> list[str]:
    import shlex

    return shlex.split(command)
