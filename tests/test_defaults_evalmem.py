"""Under the defaults, ``sqlnb evaluate`` peaks at no more than 1.3x
``sqlnb score``'s memory on the same data, and its ROC AUC and average precision stay
scikit-learn's, ties included.

The exact one-vs-rest AUC used to keep a GROUP BY group per class and distinct score (2M
rows: ~1.1 GB against score's ~0.3 GB); it now sorts the rows by score with windows whose
RANGE frames take in the ties, under a small DuckDB memory limit
(sqlnb/workflows/ranking.py, sqlnb/cli/io.py ``bound_evaluate``). Each command runs in a
fresh process and its peak is that process's ``getrusage(RUSAGE_CHILDREN).ru_maxrss``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn import metrics

import sqlnb
from sqlnb.workflows.evaluate import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _peak_mib(args: list[str]) -> float:
    """Peak RSS (MiB) of ``python -m sqlnb args`` in a fresh process (it must succeed)."""
    probe = ("import resource, subprocess, sys\n"
             "done = subprocess.run([sys.executable, '-m', 'sqlnb', *sys.argv[1:]], capture_output=True, text=True)\n"
             "assert done.returncode == 0, done.stderr[-2000:]\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1]) / 1024


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_evaluate_peaks_within_1_3x_score_under_the_defaults(tmp_path):
    """2M rows x 4 DOUBLE, 2 classes, in pyarrow's default row groups (every row a distinct
    score): f6098f3's evaluate peaked at ~1.1 GB, several times score's."""
    rng = np.random.default_rng(0)
    n, chunk = 2_000_000, 1 << 20
    data = str(tmp_path / "d.parquet")
    writer = None
    for start in range(0, n, chunk):
        y = rng.integers(0, 2, min(chunk, n - start))
        t = pa.table({**{f"x{j}": rng.normal(y * 0.3, 1.0) for j in range(4)},
                      "label": np.char.add("c", y.astype(str))})
        writer = writer or pq.ParquetWriter(data, t.schema)
        writer.write_table(t)
    writer.close()
    model = f"{tmp_path / 'm.duckdb'}:g"
    subprocess.run([sys.executable, "-m", "sqlnb", "fit", data, "--label", "label", "--model", model],
                   check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=ROOT))
    score = _peak_mib(["score", data, "--model", model, "--out", str(tmp_path / "s.parquet")])
    ev = _peak_mib(["evaluate", data, "--model", model])
    assert ev <= 1.3 * score, f"evaluate peaked at {ev:.0f} MiB, score at {score:.0f} MiB"


@pytest.mark.parametrize("K", [2, 3])
def test_ranking_with_ties_equals_scikit_learn(K):
    """Scores with heavy ties (two categorical features): per-class AUC and AP equal
    scikit-learn's on the log-odds sqlnb ranks by, within 1e-12."""
    rng = np.random.default_rng(K)
    n = 3000
    k = rng.integers(0, K, n)
    a = np.array(["a0", "a1", "a2", "a3"])[(k + (rng.random(n) < 0.5) * rng.integers(0, 4, n)) % 4]
    b = np.array(["b0", "b1", "b2"])[(k + (rng.random(n) < 0.6) * rng.integers(0, 3, n)) % 3]
    y = np.array([f"c{i}" for i in range(K)])[k]
    con = duckdb.connect()
    con.register("t", pa.table({"a": a.tolist(), "b": b.tolist(), "y": y.tolist()}))
    model = sqlnb.fit("t", "y", con=con)
    ev = evaluate(model, "t", con)
    t = model.score("t", con, outputs=("jll", "log_proba", "proba")).to_arrow_table().to_pydict()
    jll = np.array([t[f"jll_c{i}"] for i in range(K)], dtype=float).T
    log_p = np.array([t[f"log_proba_c{i}"] for i in range(K)], dtype=float).T
    P = np.array([t[f"proba_c{i}"] for i in range(K)], dtype=float).T
    labels = np.array(t["y"])
    for c in range(K):
        if K == 2:
            s = jll[:, c] - jll[:, 1 - c]
        else:  # the one-vs-rest log-odds, the rest summed in the SQL's order
            s = log_p[:, c] - np.log(P[:, [j for j in range(K) if j != c]].sum(1))
        truth = labels == f"c{c}"
        assert len(np.unique(s)) < n / 10  # heavily tied
        assert abs(ev.per_class[c].roc_auc - metrics.roc_auc_score(truth, s)) <= 1e-12
        assert abs(ev.per_class[c].average_precision - metrics.average_precision_score(truth, s)) <= 1e-12


def test_evaluate_reruns_under_1gb_when_the_small_limit_runs_out(tmp_path, monkeypatch):
    """Rows too wide for the small default limit: the same statement runs again under the
    1GB one and gives the same figures (here the small limit is made 1MB)."""
    from sqlnb.cli.app import Settings
    from sqlnb.cli.io import load
    from sqlnb.io import output
    from support.cli import invoke

    rng = np.random.default_rng(1)
    n = 50_000
    y = rng.integers(0, 3, n)
    data = str(tmp_path / "d.parquet")
    pq.write_table(pa.table({**{f"x{j}": rng.normal(y * 0.2, 1.0) for j in range(6)},
                             "label": np.char.add("c", y.astype(str))}), data)
    model = f"{tmp_path / 'm.duckdb'}:g"
    assert invoke("fit", data, "--label", "label", "--model", model).exit_code == 0

    def figures() -> dict:
        got = invoke("evaluate", data, "--model", model, "--format", "json")
        assert got.exit_code == 0, got.stderr
        out = json.loads(got.stdout)
        out.pop("seconds", None)
        return out

    default = figures()
    monkeypatch.setattr(output, "EVALUATE_MEMORY_LIMIT", "1MB")
    con = duckdb.connect()  # the small limit does run out
    con.execute("SET memory_limit = '1MB'")
    con.execute("SET disable_parquet_prefetching = true")
    with pytest.raises(duckdb.OutOfMemoryException):
        evaluate(load(Settings(), model), data, con)
    # The same statement, so the same figures, up to the order DuckDB's threads add the
    # per-row AP terms in (a parallel SUM of DOUBLEs: the last bits may differ).
    again = figures()
    assert _close(again, default), (again, default)


def _close(a, b) -> bool:
    """``a == b`` with floats equal within 1e-12 (relative), through dicts and lists."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
    return a == b
