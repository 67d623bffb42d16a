"""pyarrow is imported when a step needs it, not when sqlnb's fit path is imported.

Issue 32, point 1: the in-process fits of benchmarks/fit_floor.py (``sqlnb.fit`` in a fresh
process, no model saved) of the count families, categorical and mixed had become 0.03–0.05 s
slower than at af124e1, where their floors were documented: the store's modules imported
pyarrow at module level (for saving, fingerprints and binned columns' counts), and
pyarrow costs ~0.08 s to import (it brings cloudpickle and Cython's runtime). A fit that saves
nothing needs none of it, nor does any CLI command's ``--help``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, tmp_path: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.fixture(scope="module")
def parquet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("floor40") / "d.parquet"
    duckdb.sql("SELECT CASE i % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END AS label, "
               "(i * 7919 % 1000) / 100.0 AS x0, (i * 104729 % 997) / 10.0 AS x1, "
               "(i * 31 % 17)::DOUBLE AS n0, (i * 13 % 5)::DOUBLE AS n1, "
               "CASE i % 4 WHEN 0 THEN 'p' WHEN 1 THEN 'q' ELSE 'r' END AS c0 "
               "FROM range(3000) t(i)").write_parquet(str(path))
    return str(path)


@pytest.mark.parametrize("kind, columns", [
    ("gaussian", ["x0", "x1"]),
    ("multinomial", ["n0", "n1"]),
    ("bernoulli", ["n0", "n1"]),
    ("complement", ["n0", "n1"]),
    ("categorical", ["c0"]),
    ("auto", ["x0", "c0"]),
])
def test_a_fit_that_saves_nothing_imports_no_pyarrow(parquet, tmp_path, kind, columns):
    code = ("import sys, sqlnb\n"
            f"m = sqlnb.fit({parquet!r}, 'label', features={columns!r}, kind={kind!r}, screen=False)\n"
            "print(len(m.classes), sorted(k for k in sys.modules if k.split('.')[0] in ('pyarrow', 'cloudpickle')))\n")
    assert _run(code, tmp_path).split(None, 1) == ["3", "[]\n"]


def test_cli_help_imports_no_pyarrow(tmp_path):
    code = ("import sys\n"
            "from sqlnb.cli import main\n"
            "sys.argv = ['sqlnb', 'fit', '--help']\n"
            "try:\n"
            "    main()\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('MODS', sorted(k for k in sys.modules if k.split('.')[0] == 'pyarrow'))\n")
    out = _run(code, tmp_path)
    assert "Fit a model on DATA" in out
    assert out.rstrip().endswith("MODS []")


def test_a_saved_fit_still_saves_and_loads(parquet, tmp_path):
    """The store imports pyarrow when it writes: the model round-trips as before."""
    db = tmp_path / "m.duckdb"
    out = subprocess.run([sys.executable, "-m", "sqlnb", "fit", parquet, "--label", "label", "--model",
                          f"{db}:m", "--features", "x0,c0"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    import sqlnb

    con = duckdb.connect(str(db))
    try:
        m = sqlnb.load(con, "m")
        fresh = sqlnb.fit(parquet, "label", features=["x0", "c0"])
        assert m.classes == fresh.classes
        got = m.score(parquet, con).fetchall()
        want = fresh.score(parquet, duckdb.connect()).fetchall()
        assert got == want
    finally:
        con.close()


def test_deferred_module_behaves_as_pyarrow():
    from sqlnb.store.arrow import array, pa

    import pyarrow

    assert pa.float64() == pyarrow.float64()
    assert isinstance(array([1.0, None], pa.float64()), pyarrow.Array)
    assert array([1, 2], pa.int32()).type == pyarrow.int32()
    assert array(["a", None], pa.string()).to_pylist() == ["a", None]
    with pytest.raises(AttributeError):
        pa.__wrapped__  # dunder probes do not import or invent anything


def test_fit_parts_benchmark_runs_at_a_tiny_size(tmp_path):
    """benchmarks/fit_parts.py names each step of a fit process; its steps add up to the whole."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fit_parts.py"), "--rows", "3000", "--repeat", "1",
                          "--family", "gaussian", "--data-dir", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line.split(" | ")[0].strip("| "): [float(v) for v in line.strip(" |").split(" | ")[1:3]]
            for line in out.stdout.splitlines() if line.startswith("| ") and not line.startswith("| step")}
    assert {"bare scan (its process start subtracted)", "the data's connection", "statement 1", "save",
            "sqlnb.api.fit"} <= set(rows)
    whole = rows["whole `main()` (≈ the fit's process less its start)"][0]
    parts = sum(rows[k][0] for k in ("the data's connection", "sqlnb.api.fit", "save",
                                     "the rest (CLI, imports after the start, output)"))
    assert abs(parts - whole) < 2e-3  # rounding of the printed figures only
