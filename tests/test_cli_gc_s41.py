"""The ``sqlnb`` process freezes its imports out of garbage collection (session 41).

A full cyclic collection over everything a command imports (click, DuckDB, sqlglot, numpy,
the library) ran once per command, set off by the first SQL rendering: 0.01-0.06 s of every
command. :func:`sqlnb.cli.main` freezes those objects once the command's module is
imported; click's test runner, which runs the group inside its caller's process, does not.
Each case runs in a fresh interpreter so that this test process's collector is untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
