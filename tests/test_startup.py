"""Start-up: ``sqlnb --version`` and ``sqlnb CMD --help`` import only what they need.

DuckDB, pyarrow, numpy and sqlglot were most of a cold start (issue 17: ``sqlnb
--version`` took 0.55 s of imports); the package and the command line now import them on
first use. No timing here (benchmarks are not timed tests): what is checked is which
modules a process has loaded.
"""

from __future__ import annotations

import subprocess
import sys

import click

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
