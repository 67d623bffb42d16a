"""No default fails or bloats on ordinary data.

Each command runs as a process of its own under sqlnb's defaults (no ``--threads``, no
``--memory-limit``), and its peak memory is the child's ``ru_maxrss`` seen by a fresh
wrapper process (``resource.getrusage(RUSAGE_CHILDREN)``), so nothing pytest ran before
counts. The 10M-row figures behind the scaled-down cases are in benchmarks/README.md
("Default memory").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlnb
from sqlnb.engines import as_engine
from sqlnb.models.naive_bayes import tan

#: Runs ``sqlnb ARGS`` (after applying the module-level overrides in OVERRIDES) in a child
#: process and prints its exit code, stderr and peak RSS in MiB as JSON.
WRAPPER = r"""
import json, resource, subprocess, sys
overrides, args = json.loads(sys.argv[1]), sys.argv[2:]
code = "import sqlnb.io.output as o\n"
code += "".join(f"setattr(o, {k!r}, {v!r})\n" for k, v in overrides.items())
code += "from sqlnb.cli import main\nmain()\n"
done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"rc": done.returncode, "stderr": done.stderr, "peak_mib": peak}))
"""


def run_measured(*args, overrides: dict | None = None) -> dict:
    """``sqlnb ARGS`` in a fresh process (through a fresh wrapper): exit code, stderr, peak RSS."""
    done = subprocess.run([sys.executable, "-c", WRAPPER, json.dumps(overrides or {}), *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_a_small_tan_fit_on_bins_peaks_under_300_mb(tmp_path):
    """232 rows x 33 numeric columns, ``--structure tan --bins mdl``: 528 pair grouping sets.
    DuckDB gives each set a hash table of its own (~2.3 MB however few the rows): in one
    statement the fit peaked at 1.27 GB (f6098f3); the pair scan now runs in statements of
    a few dozen sets."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 232)
    cols = {f"f{j}": np.round(rng.normal(y * 0.7 * ((j % 3) - 1), 1.0), 3) for j in range(33)}
    cols["y"] = np.where(y == 1, "good", "bad")
    data = tmp_path / "small.parquet"
    pq.write_table(pa.table(cols), data)
    got = run_measured("fit", data, "--label", "y", "--structure", "tan", "--bins", "mdl",
                       "--model", f"{tmp_path / 'm.duckdb'}:t")
    assert got["rc"] == 0, got["stderr"]
    assert got["peak_mib"] <= 300, got


def test_pair_counts_split_over_statements_equal_one_scan(monkeypatch):
    """The split pair scan counts exactly what one statement over every pair counts
    (12 tree features, 66 pairs, in statements of 4 sets; weighted)."""
    rng = np.random.default_rng(5)
    n = 400
    k = rng.integers(0, 3, n)
    cols = {f"c{j}": pa.array(np.array(["u", "v", "w"])[(k + rng.integers(0, 2, n) * (j % 2)) % 3].tolist(),
                              mask=rng.random(n) < 0.05) for j in range(8)}
    cols.update({f"b{j}": rng.random(n) < 0.3 + 0.2 * k for j in range(4)})
    cols["w"] = rng.random(n) + 0.5
    cols["y"] = np.array(["a", "b", "c"])[k]
    table = pa.table(cols)
    monkeypatch.setattr(tan, "PAIR_SCAN_BYTES", 10 ** 12)
    whole = sqlnb.fit(table, "y", structure="tan", weight="w", screen=False)
    monkeypatch.setattr(tan, "PAIR_SCAN_BYTES", 1)
    assert tan.sets_per_scan(as_engine(None)) == tan.MIN_SETS_PER_SCAN
    split = sqlnb.fit(table, "y", structure="tan", weight="w", screen=False)
    a, b = whole.stats.pairs, split.stats.pairs
    assert a.features == b.features and len(a.features) == 12
    assert a.cells.keys() == b.cells.keys() and len(a.cells) == 66
    for pair, cell in a.cells.items():
        other = b.cells[pair]
        assert (cell.values_a, cell.values_b) == (other.values_a, other.values_b)
        assert np.array_equal(cell.counts, other.counts), pair


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_scoring_parquet_with_large_row_groups_fits_the_default_limit(tmp_path):
    """pyarrow writes Parquet in row groups of 1,048,576 rows; DuckDB reads a row group as
    one batch, and its ordered COPY collects a batch whole in each thread before writing
    it. At 10M rows x 20 columns two threads ran out of the 1 GB default limit (f6098f3).
    Scaled down by 4 (limit 256 MB, row groups of 262,144 rows, batch budget 64 MB; DuckDB
    itself runs one thread per 4 MB per column of the limit, so two threads need 200 MB):
    the write stays within the limit and the interpreter (~90 MB), in the input's order.
    f6098f3 peaked at 406 MiB here (1.18 GB or out of memory at full scale); now ~250."""
    n, group = 4 * 262_144, 262_144
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, n)
    cols = {"rid": np.arange(n, dtype=np.int64)}
    cols.update({f"x{j}": rng.normal(y * 0.1 * (j + 1), 1.0) for j in range(20)})
    cols["label"] = np.where(y == 1, "c1", "c0")
    data = tmp_path / "rows.parquet"
    pq.write_table(pa.table(cols), data, row_group_size=group)
    assert pq.ParquetFile(data).metadata.num_row_groups == 4
    model = f"{tmp_path / 'm.duckdb'}:m"
    fitted = run_measured("fit", data, "--label", "label", "--exclude", "rid", "--model", model)
    assert fitted["rc"] == 0, fitted["stderr"]
    out = tmp_path / "scored.parquet"
    got = run_measured("score", data, "--model", model, "--out", out,
                       overrides={"WRITE_MEMORY_LIMIT": "256MB", "ORDERED_BATCH_BYTES": 64 * 2**20,
                                  "PREFETCH_MAX_BYTES": 16 * 2**20})
    assert got["rc"] == 0, got["stderr"]
    assert got["peak_mib"] <= 300, got
    rid = pq.read_table(out, columns=["rid"]).column("rid").to_numpy()
    assert np.array_equal(rid, np.arange(n))
