"""CI runs the README's test command verbatim, in two processes.

``.ci/run`` ends with the README's second command; both run pytest under pytest-xdist with
``-n 2 --dist loadfile``: two workers for CI's two cores, each test file whole in one
worker, so a module fixture (a JVM, a PostgreSQL server, models fitted once for a file) is
set up once, as without ``-n``, not once in each worker that happens to get some of its tests.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The options the README's command and .ci/run give pytest.
PARALLEL = ["-n", "2", "--dist", "loadfile"]


def readme_test_command() -> str:
    """The second line of the README's first ``bash`` block (the install + tests line)."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README.md has no bash block"
    lines = block.group(1).strip().splitlines()
    assert len(lines) == 2, lines
    return lines[1]


def test_ci_runs_the_readmes_test_command_verbatim():
    command = readme_test_command()
    script = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    runs = [line for line in script if "-m pytest" in line]
    assert runs == [command], (runs, command)


def test_the_test_command_runs_two_workers_each_file_whole_in_one():
    words = shlex.split(readme_test_command().split("&&")[-1])
    assert words[:3] == [".venv/bin/python", "-m", "pytest"], words
    assert words[3:] == PARALLEL, words


def test_the_test_extra_installs_pytest_xdist():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(re.match(r"pytest-xdist\b", req) for req in extra), extra


def test_the_readmes_inner_loop_command_runs_the_same_workers():
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f'.venv/bin/python -m pytest {" ".join(PARALLEL)} -m "not slow"' in text


def test_no_test_file_starts_a_jvm_outside_the_main_thread():
    """pyspark launches its JVM with ``Popen(preexec_fn=...)``: Python runs in the forked
    child, which is unsafe while other threads of the process run. test_engines.py started
    its session from a thread pool while the main thread ran PostgreSQL tests; under two
    workers, after scikit-learn's checks in the same worker, the child segfaulted and every
    Spark test of the file failed. A file that starts Spark must not start threads."""
    import ast

    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
                {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        imports = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                   for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                        if isinstance(n, ast.ImportFrom) and n.module}
        starts_spark = bool(names & {"spark_session", "spark_engine"}) and path.name != "spark.py"
        threads = bool(imports & {"concurrent", "threading"}) or bool(names & {"ThreadPoolExecutor", "Thread"})
        if starts_spark and threads:
            offenders.append(path.name)
    assert offenders == [], offenders


def test_an_unmarked_test_that_starts_an_engine_fails(monkeypatch):
    """tests/support/engines.py fails a test that starts PostgreSQL or Spark without the
    engine's marker (tests/conftest.py names the running test): the markers are what
    ``-m "not slow"`` and ``-m "not postgres"`` go by. Here with a server that "starts" at
    once, for this (unmarked) test, and the same test seen as marked."""
    import contextlib

    import pytest

    from support import engines, postgres

    stopped = []

    @contextlib.contextmanager
    def fake_server(tcp=False):
        yield "host=/nowhere"
        stopped.append(True)

    monkeypatch.setattr(postgres, "postgres_server", fake_server)
    with pytest.raises(pytest.fail.Exception, match=r"starts a PostgreSQL server but is not marked: "
                                                    r"add @pytest.mark.postgres"):
        engines.start_postgres()
    assert stopped == [True]  # the server started for nothing is stopped

    class Marked:
        nodeid = "tests/x.py::test_y"

        @staticmethod
        def get_closest_marker(name):
            return object() if name == "postgres" else None

    monkeypatch.setattr(engines, "CURRENT_TEST", Marked)
    cm, dsn = engines.start_postgres()
    assert dsn == "host=/nowhere"
    cm.__exit__(None, None, None)
