"""Start-up: ``sqlnb --version`` and ``sqlnb CMD --help`` import only what they need.

DuckDB, pyarrow, numpy and sqlglot were most of a cold start (``sqlnb
--version`` took 0.55 s of imports); the package and the command line now import them on
first use. No timing here (benchmarks are not timed tests): what is checked is which
modules a process has loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

HEAVY = ("duckdb", "pyarrow", "numpy", "sqlglot", "sklearn", "pyspark", "psycopg")


def _loaded_after(args: list[str]) -> tuple[list[str], str]:
    """(heavy modules loaded, stdout) after ``sqlnb ARGS`` in a fresh interpreter."""
    code = ("import sys\nfrom sqlnb.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    *payload, loaded = done.stdout.splitlines()
    return eval(loaded), "\n".join(payload)  # noqa: S307 -- our own repr of a list of names


def test_version_imports_no_library():
    loaded, out = _loaded_after(["--version"])
    assert out.startswith("sqlnb ") and loaded == []


def test_import_sqlnb_is_light_and_every_public_name_resolves():
    code = ("import sys, sqlnb\nlight = not any(m in sys.modules for m in ('duckdb', 'pyarrow', 'sqlglot'))\n"
            "missing = [n for n in sqlnb.__all__ if not hasattr(sqlnb, n)]\n"
            "import sqlnb.models.base  # the subpackage sqlnb/models/ is sqlnb.models, the one thing of that name\n"
            "print(light, missing, sqlnb.models.__name__, callable(sqlnb.list_models), sqlnb.compare.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "[]", "sqlnb.models", "True", "sqlnb.workflows.compare"], done.stderr


def test_a_command_help_imports_that_command_only():
    loaded, out = _loaded_after(["demo", "--help"])
    assert "Usage: sqlnb demo" in out
    assert "pyspark" not in loaded and "psycopg" not in loaded and "sklearn" not in loaded


def test_every_command_is_listed_and_found_by_its_name():
    from sqlnb.cli import COMMANDS, cli

    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        assert cli.get_command(ctx, name).name == name
    assert cli.get_command(ctx, "no-such-command") is None


def test_the_engine_choices_are_the_engines():
    from sqlnb import engines
    from sqlnb.cli import ENGINES

    assert ENGINES == engines.ENGINES


# --------------------------------------------------------------------------------------------
# The ``sqlnb`` process freezes its imports out of garbage collection.
#
# A full cyclic collection over everything a command imports (click, DuckDB, sqlglot, numpy,
# the library) ran once per command, set off by the first SQL rendering: 0.01-0.06 s of every
# command. :func:`sqlnb.cli.main` freezes those objects once the command's module is
# imported; click's test runner, which runs the group inside its caller's process, does not.
# Each case runs in a fresh interpreter so that this test process's collector is untouched.
# --------------------------------------------------------------------------------------------


CHILD = r"""
import gc, json, sys
counts = {"gen2": 0}
gc.callbacks.append(lambda phase, info: counts.__setitem__("gen2", counts["gen2"] + (phase == "stop" and info["generation"] == 2)))
mode, data = sys.argv[1], sys.argv[2]
args = ["fit", data, "--label", "y", "--model", sys.argv[3] + ":m"]
before = gc.get_freeze_count()
counts["gen2"] = 0
if mode == "main":
    from sqlnb.cli import main
    try:
        main(args)
    except SystemExit as e:
        assert not e.code, e.code
else:
    from click.testing import CliRunner
    from sqlnb.cli import cli
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
print(json.dumps({"frozen_before": before, "frozen": gc.get_freeze_count(), "gen2": counts["gen2"],
                  "flag": __import__("sqlnb.cli", fromlist=["cli"]).cli.freeze_imports}))
"""


@pytest.fixture()
def data(tmp_path):
    import duckdb

    path = tmp_path / "d.parquet"
    duckdb.connect().execute(f"COPY (SELECT i::DOUBLE AS x, (i % 5)::DOUBLE AS z, CASE WHEN i % 3 = 0 THEN 'a' "
                             f"ELSE 'b' END AS y FROM range(5000) t(i)) TO '{path}' (FORMAT parquet)")
    return str(path)


def _run(mode: str, data: str, tmp_path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, data, str(tmp_path / f"{mode}.duckdb")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_sqlnb_process_freezes_its_imports_and_runs_no_full_collection(data, tmp_path):
    got = _run("main", data, tmp_path)
    assert got["frozen_before"] == 0 and got["frozen"] > 10_000
    assert got["gen2"] == 0
    assert got["flag"] is False  # put back once the command has run


def test_a_caller_running_the_group_in_its_own_process_keeps_its_collector(data, tmp_path):
    got = _run("runner", data, tmp_path)
    assert got["frozen"] == 0
