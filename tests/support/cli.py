"""Helpers for the command-line tests: small generated data, invoking ``sqlnb`` in-process
(click's CliRunner) or as a real subprocess, and checking that a failed command changed
nothing on disk."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result

import sqlnb
from sqlnb.cli import EXIT_USAGE, cli

SCRIPT = Path(sys.executable).with_name("sqlnb")


def mixed_table(n: int = 150, seed: int = 0, classes=("a", "b", "c"), nulls: bool = True) -> pa.Table:
    """Numeric, categorical and boolean features whose distribution depends on ``y``,
    with a few NULLs in ``x`` and ``color`` (when ``nulls``)."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, len(classes), n)
    x = rng.normal(1.5 * k, 1.0)
    color = np.array(["red", "green", "blue"])[(k + (rng.random(n) < 0.3)) % 3]
    mask_x = (rng.random(n) < 0.05) if nulls else np.zeros(n, bool)
    mask_c = (rng.random(n) < 0.05) if nulls else np.zeros(n, bool)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "x": pa.array(x, pa.float64(), mask=mask_x),
        "z": pa.array(rng.normal(-k, 2.0), pa.float64()),
        "color": pa.array(color.tolist(), pa.string(), mask=mask_c),
        "flag": pa.array(rng.random(n) < 0.2 + 0.3 * k),
        "y": pa.array(np.array(classes, dtype=object)[k].tolist()),
    })


def write_parquet(table: pa.Table, path: Path) -> str:
    pq.write_table(table, path)
    return str(path)


def invoke(*args: str, env: dict | None = None, runner: CliRunner | None = None) -> Result:
    """Run ``sqlnb ARGS`` in-process; unexpected exceptions propagate (a bug, not a
    user error, so the test shows its traceback)."""
    runner = runner or CliRunner()
    return runner.invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def run_process(*args: str, module: bool = False, env: dict | None = None, cwd: str | None = None,
                **kwargs) -> subprocess.CompletedProcess:
    """Run the installed ``sqlnb`` console script (or ``python -m sqlnb``) for real."""
    cmd = [sys.executable, "-m", "sqlnb"] if module else [str(SCRIPT)]
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, env=full_env,
                          cwd=cwd, timeout=120, **kwargs)


def run_in(directory, *args: str, process: bool = False):
    """``sqlnb ARGS`` run in ``directory``: a real process when ``process``, else in-process
    through click (the same command, without a Python start-up per call)."""
    if process:
        return run_process(*args, module=True, cwd=str(directory))
    old = os.getcwd()
    os.chdir(directory)
    try:
        return invoke(*args)
    finally:
        os.chdir(old)


def csv_rows(text: str) -> list[dict]:
    """The rows of a CSV text (``sqlnb score --out -``'s output), as dicts of strings."""
    return list(csv.DictReader(io.StringIO(text)))


def exit_code(result) -> int:
    """The exit code of an in-process (click) or a real process's result."""
    return getattr(result, "exit_code", getattr(result, "returncode", None))


def assert_error(result, *fragments: str, code: int = EXIT_USAGE) -> str:
    """The command failed with ``code``, printed nothing on stdout and exactly one
    ``Error:`` line on stderr holding every fragment; returns that line."""
    exit_code = getattr(result, "exit_code", getattr(result, "returncode", None))
    assert exit_code == code, (exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("Error: "), line
    assert "Traceback" not in result.stderr
    for f in fragments:
        assert f in line, (f, line)
    return line


def snapshot(*paths) -> dict:
    """Existence, bytes and mtime of each path, plus the directory listings around them
    (temporary files left behind would show up there) and, for databases, their models."""
    state = {}
    for p in map(Path, paths):
        if p.is_dir():
            state[str(p)] = sorted(os.listdir(p))
            continue
        state[f"{p.parent} listing"] = sorted(os.listdir(p.parent)) if p.parent.exists() else None
        if p.exists():
            state[str(p)] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            if p.suffix in (".duckdb", ".db"):
                state[f"{p} models"] = [(m["name"], m["created"]) for m in sqlnb.list_models(str(p))]
        else:
            state[str(p)] = None
    return state


def fitted_dir(d: Path, train_rows: int, test_rows: int) -> Path:
    """``d`` with ``train.parquet`` and ``test.parquet`` (:func:`mixed_table`, seeds 1 and
    2) and the naive Bayes model ``m.duckdb:nb`` fitted on train by ``sqlnb fit``."""
    write_parquet(mixed_table(train_rows, seed=1), d / "train.parquet")
    write_parquet(mixed_table(test_rows, seed=2), d / "test.parquet")
    fitted = invoke("fit", d / "train.parquet", "-y", "y", "--exclude", "id", "-m", f"{d}/m.duckdb:nb")
    assert fitted.exit_code == 0, fitted.stderr
    return d
