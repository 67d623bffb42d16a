"""Wide models: fit and score thousands of Gaussian or Bernoulli columns in DuckDB.

The aim: 10,000 feature columns on 2,000 rows. A SELECT with one aggregate (or
one term) per column costs DuckDB planner time that grows quadratically with the number
of repeated sub-expressions, so from ``WIDE_MIN`` columns sqlnb fits in the long shape
(:func:`sqlnb.sql.long_select`) and scores with ``list_dot_product``
(sqlnb/models/naive_bayes/wide.py). This script times ``sqlnb.fit`` and ``Model.score``
(fetched into numpy) against scikit-learn's fit and ``predict_proba`` on the same numbers,
and reports the largest probability difference. ``--class-constant`` makes every column
constant in class 0 (indicators present in one class only), the case that takes the exact
M2 pass.

::

    python benchmarks/wide_columns.py --columns 2500 5000 10000 --kind gaussian bernoulli
"""

from __future__ import annotations

import argparse
import time

import duckdb
import numpy as np
import pyarrow as pa

import sqlnb


def data(columns: int, rows: int, kind: str, class_constant: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    if class_constant:
        X = ((rng.random((rows, columns)) < 0.3) & (y[:, None] == 1)) + rng.normal(size=(rows, columns)) * (y[:, None] == 1)
        X = X.astype(float) if kind == "gaussian" else (X > 0.5).astype(np.int8)
    elif kind == "gaussian":
        X = 1000.0 + rng.normal(size=(rows, columns)) + 0.002 * y[:, None]
    else:
        X = (rng.random((rows, columns)) < 0.3 + 0.002 * y[:, None]).astype(np.int8)
    return X, y


def measure(columns: int, rows: int, kind: str, class_constant: bool) -> dict:
    from sklearn.naive_bayes import BernoulliNB, GaussianNB

    X, y = data(columns, rows, kind, class_constant)
    con = duckdb.connect()
    con.register("t_arrow", pa.table({**{f"x{j}": X[:, j] for j in range(columns)}, "y": y}))
    con.execute("CREATE TABLE t AS SELECT * FROM t_arrow")
    t0 = time.perf_counter()
    model = sqlnb.fit("t", label="y", con=con, kind=kind, features=[f"x{j}" for j in range(columns)])
    t1 = time.perf_counter()
    got = model.score("t", con=con, outputs=("proba",), keep=[]).fetchnumpy()
    t2 = time.perf_counter()
    sk = GaussianNB() if kind == "gaussian" else BernoulliNB(alpha=1.0)
    sk.fit(X, y)
    t3 = time.perf_counter()
    expected = sk.predict_proba(X)
    t4 = time.perf_counter()
    diff = float(np.max(np.abs(expected[:, 1] - got[f"proba_{model.classes[1]}"])))
    return {"columns": columns, "rows": rows, "kind": kind, "fit": t1 - t0, "score": t2 - t1,
            "sk_fit": t3 - t2, "sk_proba": t4 - t3, "max_diff": diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--columns", type=int, nargs="+", default=[2500, 5000, 10000])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--kind", nargs="+", default=["gaussian", "bernoulli"], choices=["gaussian", "bernoulli"])
    ap.add_argument("--class-constant", action="store_true", help="every column constant in class 0")
    args = ap.parse_args()
    print("| columns | rows | kind | sqlnb fit (s) | sqlnb score (s) | sklearn fit (s) | sklearn predict_proba (s) "
          "| max abs diff |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for kind in args.kind:
        for columns in args.columns:
            r = measure(columns, args.rows, kind, args.class_constant)
            print(f"| {columns:,} | {r['rows']:,} | {kind} | {r['fit']:.2f} | {r['score']:.2f} | {r['sk_fit']:.2f} "
                  f"| {r['sk_proba']:.2f} | {r['max_diff']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
