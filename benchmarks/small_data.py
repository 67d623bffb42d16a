"""Latency on small data: what an analyst iterating on a few thousand rows waits for.

Per data set, in one fresh process each (so the first call pays what a new session
pays), the seconds of each call, first call and the median of the next ``--repeat``:

``fit``
    ``sqlnb.fit(table, label, ...)`` on an in-memory Arrow table (no file read);
``score``
    ``model.score(table).to_arrow_table()``: building the scoring SELECT, planning and
    running it in DuckDB, rows to Arrow;
``to_sql``
    ``model.to_sql("duckdb")``: the scoring SELECT rendered as text;
``plan``
    of ``score``, DuckDB's planning of the scoring SELECT (binding and optimising, from its
    profiler, in a run of its own after the timed calls);
``sklearn``
    scikit-learn's fit + ``predict_proba`` of the same model on the same rows, numpy
    arrays in memory.

Data sets: scikit-learn's ``digits`` (1,797 rows x 64 count columns x 10 classes;
multinomial, against ``MultinomialNB``) and ``iris`` (150 x 4 x 3; Gaussian, against
``GaussianNB``); ``adult`` (``../shared/data``: 32,561 rows, 6 numeric + 8 categorical
columns x 2 classes, NULLs marginalised; against ``GaussianNB`` on the numeric columns plus
``CategoricalNB`` on the ordinal-encoded categorical ones, '?' kept as a category, the
same model up to how missing values are treated), when the data folder is there.

Examples
--------
python benchmarks/small_data.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import baselines  # noqa: E402
from run import machine  # noqa: E402

DATASETS = ("digits", "iris", "adult")


def _data(name: str):
    """(Arrow table, label, fit kwargs, sklearn callable doing fit + predict_proba)."""
    import numpy as np
    import pyarrow as pa

    if name in ("digits", "iris"):
        from sklearn.datasets import load_digits, load_iris
        from sklearn.naive_bayes import GaussianNB, MultinomialNB

        bunch = (load_digits if name == "digits" else load_iris)()
        X, y = bunch.data.astype(float), bunch.target
        cols = [f"x{j}" for j in range(X.shape[1])]
        table = pa.table({**{c: X[:, j] for j, c in enumerate(cols)}, "y": y})
        est = MultinomialNB if name == "digits" else GaussianNB
        kind = "multinomial" if name == "digits" else "gaussian"
        return table, "y", {"kind": kind}, lambda: est().fit(X, y).predict_proba(X)

    from sklearn.naive_bayes import CategoricalNB, GaussianNB
    from support import shared_data as sd

    if not sd.shared_data_available("adult_train"):
        return None
    import duckdb

    table = sd.relation(duckdb.connect(), "adult_train").to_arrow_table()
    d = sd.numpy_dataset("adult_train", missing="value")

    def sk():
        g = GaussianNB().fit(d.numeric, d.y)
        c = CategoricalNB(min_categories=[len(v) for v in d.categories]).fit(d.categorical, d.y)
        # The two models' joint log-likelihoods add, less one class prior.
        jll = (g.predict_joint_log_proba(d.numeric) + c.predict_joint_log_proba(d.categorical)
               - np.log(g.class_prior_))
        return np.exp(jll - jll.max(axis=1, keepdims=True))

    return table, "income", {}, sk


def _planning(con, text: str) -> float:
    """Seconds DuckDB spends binding and optimising ``text``, from its JSON profile."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "profile.json")
        con.execute("PRAGMA enable_profiling = 'json'")
        con.execute("SET profiling_mode = 'detailed'")
        con.execute(f"PRAGMA profiling_output = '{path}'")
        con.execute(text).fetchall()
        con.execute("PRAGMA disable_profiling")
        with open(path) as f:
            prof = json.load(f)

    def get(name: str) -> float:
        if name in prof:  # flat "planner.total_time" or nested
            return float(prof[name])
        head, tail = name.split(".")
        return float(prof[head][tail])
    return get("planner.total_time") + get("optimizer.total_time")


def measure(name: str, repeat: int) -> dict | None:
    """``{call: [seconds, ...]}`` for one data set, in this (fresh) process."""
    import duckdb

    import sqlnb
    from sqlnb import sql
    from sqlnb.source import resolve

    got = _data(name)
    if got is None:
        return None
    table, label, kwargs, sk = got
    out: dict = {"fit": [], "score": [], "to_sql": [], "sklearn": [], "plan": []}
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        model = sqlnb.fit(table, label, con=con, screen=False, **kwargs)
        t1 = time.perf_counter()
        model.score(table, con=con).to_arrow_table()
        t2 = time.perf_counter()
        model.to_sql("duckdb")
        t3 = time.perf_counter()
        sk()
        t4 = time.perf_counter()
        for k, s in zip(out, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            out[k].append(s)
        text = sql.render(model.scoring_query(resolve(table, con), nan_gate=True), "duckdb")
        out["plan"].append(_planning(con, text))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    args = ap.parse_args(argv)
    info = machine()
    command = "python benchmarks/small_data.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"`{command}`; {info['cpu']}, {info['memory']}; {info['versions']}\n")
    print("seconds per call, in a fresh process: first call / median of the next "
          f"{args.repeat}\n")
    print("| data | fit | score (to Arrow) | of which DuckDB plans | to_sql | fit + score | "
          "scikit-learn fit + predict_proba |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.datasets.split(","):
        got = baselines.isolated(measure, name, args.repeat)
        if got is None:
            print(f"| {name} | (../shared/data not found) | | | | | |")
            continue
        both = [f + s for f, s in zip(got["fit"], got["score"])]
        got["fit+score"] = both

        def cell(k):
            return f"{got[k][0]:.3f} / {statistics.median(got[k][1:]):.3f}"
        print(f"| {name} | {cell('fit')} | {cell('score')} | {cell('plan')} | {cell('to_sql')} | {cell('fit+score')} | "
              f"{cell('sklearn')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
