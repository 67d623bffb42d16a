"""Every code block in README.md and docs/*.md is run, its output compared, or marked as not run.

A block is run when it is a shell session (``$ command`` lines and their output), a file a
session writes and runs (``<!-- doc-test: file NAME -->``: a Python example saved as a file,
then ``$ python NAME`` with its printed output), or a block left to an engine's doc test
(``<!-- doc-test: engine postgres -->``). Any other block (a diagram, a formula, a synopsis,
a call on placeholder files or servers, a benchmark of minutes) is preceded by
``<!-- doc-test: not run: REASON -->``, an HTML comment GitHub does not show, with the reason
why it is not run. ``test_every_code_block_is_run_or_marked_not_run`` fails on any block that
is neither (indented code blocks included: they cannot carry the comment), so the number of
unmarked blocks stays at zero.

How blocks are found, grouped into sessions and prepared is described in
``tests/support/doc_blocks.py`` (in short: ``$ command`` lines followed by their output, one
bash process per session in a fresh temporary directory, data made by the commands the docs
show -- ``sqlnb demo`` -- or read from ``../shared/data``, and HTML comments
``<!-- doc-test: ... -->`` for the exceptions). Commands run as a user runs them: through
bash, pipes included, with ``sqlnb`` and ``python`` on PATH being this checkout's (a wrapper
around ``sys.executable -m sqlnb``), stdout and stderr together, in the C.UTF-8 locale (so
that ``ls`` sorts the same everywhere). Before comparing, timestamps, numbers of seconds and
the temporary directory's path are replaced (``doc_blocks.NORMALISE``).

A failure names the file, the line, the block and the command whose output differs. After a
change to the CLI's output, ``SQLNB_DOCS_UPDATE=1 pytest tests/test_docs.py`` rewrites the
documented outputs with what the commands print now (review the diff before committing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from support import doc_blocks as db

REPO = db.REPO
MAX_UNMARKED = 0           # every block shown is run or says why not (a skipped check is a defect)
#: Blocks marked not run today: a ratchet, so that marking another block is a visible change here.
MAX_NOT_RUN = 24
SESSION_TIMEOUT = 600
#: The tests that run the blocks marked ``<!-- doc-test: engine NAME -->`` (not sessions here).
ENGINE_DOC_TESTS = {"postgres": "tests/test_docs_postgres.py"}

BLOCKS = db.all_blocks()
SESSIONS: dict[tuple[str, str], list[db.Block]] = defaultdict(list)
for _b in BLOCKS:
    if _b.is_session or (_b.file is not None and _b.not_run is None):
        SESSIONS[(_b.path.name, _b.session)].append(_b)
NOT_RUN = [b for b in BLOCKS if b.not_run is not None]
UNMARKED = [b for b in BLOCKS if b.unmarked]


def _require(paths: tuple[str, ...]) -> None:
    missing = [p for p in paths if not (REPO / p).exists()]
    if missing:
        reason = (f"needs {', '.join(missing)} (relative to the repository root), not found: the "
                  "UCI files live outside the repository, see ../shared/data/README.md")
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but the shared data is missing -- {reason}", pytrace=False)
        pytest.skip(reason)


def _file_commands(blocks: list[db.Block], path: Path) -> list[db.Command]:
    return [c for b in blocks if b.path == path for c in b.commands]


def _update(results: list[tuple[db.Command, db.Block, list[str]]]) -> None:
    """Rewrite the documented outputs with the printed ones (SQLNB_DOCS_UPDATE=1). The file
    is parsed again first: another session's update may have moved its lines (a command is
    found again by its position among the file's commands, which updates do not change)."""
    by_file = defaultdict(list)
    for c, block, raw in results:
        by_file[block.path].append((_file_commands(BLOCKS, block.path).index(c), raw))
    for path, items in by_file.items():
        now = _file_commands(db.parse_markdown(path), path)
        lines = path.read_text(encoding="utf-8").splitlines()
        for k, raw in sorted(items, key=lambda t: -t[0]):
            start = now[k].output_line - 1
            lines[start:start + len(now[k].output)] = raw
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_session(blocks: list[db.Block], tmp_path: Path) -> tuple[list[str], list]:
    """Run one session's blocks in a fresh directory under ``tmp_path``: the messages of the
    commands whose output differs from the documented one, and (command, block, raw output)
    for each of them."""
    work, env = db.prepare(tmp_path)
    for b in blocks:
        if b.file is not None:
            (work / b.file).write_text("\n".join(b.body) + "\n", encoding="utf-8")
    commands = [(c, b) for b in blocks for c in b.commands]
    assert commands, "a session with file blocks but no commands"
    script = db.session_script([c for c, _ in commands])
    proc = subprocess.run(["bash", "-c", script + "\nexit 0\n"], cwd=work, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=SESSION_TIMEOUT)
    outputs = db.split_output(proc.stdout, len(commands))
    tmps = sorted({str(tmp_path), os.path.realpath(tmp_path)}, key=len, reverse=True)
    problems, results = [], []
    for (c, b), raw in zip(commands, outputs):
        actual = raw
        for t in tmps:
            actual = db.normalise(actual, t)
        problem = db.mismatch(c, db.normalise(c.output), actual, b)
        if problem:
            problems.append(problem)
            results.append((c, b, raw))
    return problems, results


@pytest.mark.parametrize("key", sorted(SESSIONS), ids=lambda k: f"{k[0]}::{k[1]}")
def test_documented_session_prints_what_the_docs_show(key, tmp_path):
    blocks = SESSIONS[key]
    _require(tuple(sorted({p for b in blocks for p in b.requires})))
    problems, results = run_session(blocks, tmp_path)
    if problems and os.environ.get("SQLNB_DOCS_UPDATE"):
        _update(results)
    assert not problems, (f"{len(problems)} documented output(s) of session {key[1]!r} in "
                          f"{key[0]} differ from what the commands print now:\n\n"
                          + "\n\n".join(problems))


def test_a_one_character_change_is_caught_and_located(tmp_path):
    """The runner on a small markdown file: run-dependent text (seconds, a timestamp, the
    directory) is normalised, exit statuses and pipes behave as in a terminal, files are
    written, and one wrong character is reported with its file, line and command."""
    md = tmp_path / "page.md"
    md.write_text(r"""# page

<!-- doc-test: file hello.txt -->
```text
hello
```

```console
$ echo "took 0.25 s at $(date '+%Y-%m-%d %H:%M:%S') in $PWD"
took 12 s at 2001-02-03 04:05:06 in <TMP>/work
$ cat hello.txt | tr h j
jello
$ python -c 'import sys; sys.exit("Error: no")'; echo $?
Error: no
1
$ printf 'a\nb\n' | \
  head -1
b
```
""", encoding="utf-8")
    blocks = db.parse_markdown(md)
    assert [len(b.commands) for b in blocks if b.file is None] == [4]
    (tmp_path / "run").mkdir()
    problems, _ = run_session(blocks, tmp_path / "run")
    assert len(problems) == 1, problems
    assert problems[0].startswith(r"page.md:18: output of `$ printf 'a\nb\n' | \` (block at line 8, "
                                  "command at line 16) differs at its output line 1:"), problems[0]
    assert "docs: 'b'" in problems[0] and "now:  'a'" in problems[0], problems[0]


def test_the_docs_are_run_and_few_blocks_are_not():
    """The parser finds the sessions (a parser bug must not make the test above vacuous),
    the blocks not run are few and each says why, and every block left to an engine's doc
    test has one."""
    cli = [c for (name, _), bs in SESSIONS.items() if name == "cli.md" for b in bs for c in b.commands]
    assert len(cli) >= 40, f"only {len(cli)} commands found in docs/cli.md"
    assert {s for (name, s) in SESSIONS if name == "cli.md"} >= {"demo", "adult"}
    listing = "\n".join(f"  {b.where}: {b.not_run}" for b in NOT_RUN)
    print(f"{len(NOT_RUN)} block(s) not run:\n{listing}")
    assert all(b.not_run for b in NOT_RUN), listing
    assert len(NOT_RUN) <= MAX_NOT_RUN, f"more blocks not run than MAX_NOT_RUN:\n{listing}"
    assert not any(b.commands for b in NOT_RUN), "a block marked not run has commands parsed to run"
    for b in BLOCKS:
        if b.engine is not None:
            assert b.engine in ENGINE_DOC_TESTS, f"{b.where}: no test runs blocks of engine {b.engine!r}"
            assert (REPO / ENGINE_DOC_TESTS[b.engine]).exists() and b.commands, b.where


def test_every_code_block_is_run_or_marked_not_run():
    """Every fenced (or indented) block of README.md and docs/*.md is a session block, a
    file block, an engine block, or marked ``<!-- doc-test: not run: REASON -->``."""
    listing = "\n".join(f"  {b.where}: ```{b.lang}{' (indented)' if b.indented else ''} {b.body[0][:60] if b.body else ''!r}"
                        for b in UNMARKED)
    assert len(UNMARKED) <= MAX_UNMARKED, (
        f"{len(UNMARKED)} code block(s) neither run nor marked: make each run (a `$ ` session, or a "
        "<!-- doc-test: file NAME --> block run by one) or put <!-- doc-test: not run: REASON --> "
        f"right before its fence (indented blocks: write them as fences):\n{listing}")


def test_the_block_census_sees_unmarked_blocks(tmp_path):
    """The census above on a small page: an unmarked Python block, an output block and an
    indented block are found; a marked one, a file block and a session block are not
    (a parser that found no blocks would make that test vacuous)."""
    md = tmp_path / "page.md"
    md.write_text("""# page

```python
print(1)
```
```
1
```

    indented code

- a list item

    its continuation, not code

<!-- doc-test: not run: a diagram -->
```
a -> b
```

<!-- doc-test: file hello.py -->
```python
print("hello")
```

```console
$ python hello.py
hello
```
""", encoding="utf-8")
    blocks = db.parse_markdown(md)
    assert [(b.line, b.unmarked) for b in blocks] == [(3, True), (6, True), (10, True), (17, False),
                                                      (22, False), (26, False)]
    assert [b.line for b in blocks if b.is_session] == [26] and blocks[-2].file == "hello.py"


def test_demo_by_hand_commands_run_after_the_demo(tmp_path):
    """The commands `sqlnb demo --dir DIR` prints under "the same by hand" run, as printed,
    in the directory it ran in (they overwrite its model and scored rows)."""
    work, env = db.prepare(tmp_path)

    def sh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=work, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=SESSION_TIMEOUT)

    demo = sh("sqlnb demo --dir demo --rows 600")
    assert demo.returncode == 0, demo.stderr
    by_hand = demo.stdout.split("== the same by hand ==\n", 1)[1].splitlines()
    assert len(by_hand) == 5 and all(line.startswith("  sqlnb ") for line in by_hand), by_hand
    for line in by_hand:
        done = sh(line.strip())
        assert done.returncode == 0, f"`{line.strip()}` failed: {done.stderr}"


def test_the_documented_adult_loader_reads_what_the_test_suite_reads(tmp_path):
    """docs/cli.md's load_adult.py gives the tables of tests/support/shared_data.py's parser:
    the same columns, types and rows (as multisets; both keep file order)."""
    import duckdb

    from support import shared_data as sd

    sd.require_shared_data("adult_train", "adult_test")
    [loader] = [b for b in BLOCKS if b.file == "load_adult.py"]
    (tmp_path / "load_adult.py").write_text("\n".join(loader.body) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "load_adult.py", str(sd.DATA_DIR / "adult")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=SESSION_TIMEOUT)
    assert done.returncode == 0, done.stderr
    with duckdb.connect(str(tmp_path / "adult.duckdb"), read_only=True) as con:
        for table, query in (("adult_train", sd.adult_train_query()), ("adult_test", sd.adult_test_query())):
            ref = sd.render(query)
            assert (con.execute(f"DESCRIBE {table}").fetchall()
                    == con.execute(f"DESCRIBE ({ref})").fetchall())
            for a, b in ((f"FROM {table}", ref), (ref, f"FROM {table}")):
                assert con.execute(f"SELECT count(*) FROM (({a}) EXCEPT ALL ({b}))").fetchall() == [(0,)]
            assert con.execute(f"SELECT count(*) FROM {table}").fetchall() == \
                con.execute(f"SELECT count(*) FROM ({ref})").fetchall()


def test_the_readme_python_quickstart_runs_where_a_class_never_shows_a_value(tmp_path):
    """The README's Python quickstart (its session runs it on the demo's data) also runs on
    data where one class never shows one of a column's values, as most categorical data has:
    its smoothing must hold a zero count (``estimator="map"`` with α < 1 has no mode there
    and is refused). Here the demo's training rows without the gold customers on the basic plan."""
    work, env = db.prepare(tmp_path)
    blocks = [b for b in BLOCKS if b.path.name == "README.md" and b.file == "quickstart.py"]
    assert len(blocks) == 1, "README.md has no <!-- doc-test: file quickstart.py --> block to run"
    [block] = blocks
    (work / "quickstart.py").write_text("\n".join(block.body) + "\n", encoding="utf-8")

    def sh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=work, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=SESSION_TIMEOUT)

    assert sh("sqlnb demo --dir demo --rows 2000").returncode == 0
    import duckdb

    with duckdb.connect() as con:
        train = str(work / "demo" / "train.parquet")
        kept = con.sql(f"FROM '{train}' WHERE NOT (segment = 'gold' AND plan = 'basic')").to_arrow_table()
        con.register("kept", kept)
        counts = dict(con.sql("SELECT segment, count(*) FILTER (plan = 'basic') FROM kept GROUP BY ALL").fetchall())
        assert counts["gold"] == 0 and counts["bronze"] > 0, counts
        con.execute(f"COPY kept TO '{train}'")
    done = sh("python quickstart.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prediction" in done.stdout and "Error" not in done.stdout + done.stderr
