"""Fit and score time of KDB(1), KDB(2) (``structure="kdb:K"``) against naive Bayes and TAN
on UCI adult, numeric columns in MDL bins.

Fit: ``sqlnb.fit`` on adult.data's 32,561 rows (a DuckDB table), ``bins="mdl"``. Score:
``model.score`` of adult.test's 16,281 rows, probabilities fetched as Arrow. Each figure is
the best of ``REPEATS`` runs; the structures take turns in every repeat (back to back), so a
ratio is read within one repeat's load. The load average is printed with the figures.

Example
-------
python benchmarks/kdb_adult.py
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from support.shared_data import query, render  # noqa: E402

import sqlnb  # noqa: E402
from sqlnb.errors import ScreeningWarning  # noqa: E402

warnings.simplefilter("ignore", ScreeningWarning)
STRUCTURES = ("naive", "tan", "kdb:1", "kdb:2")
REPEATS = 3


def main() -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE adult_train AS {render(query('adult_train'))}")
    con.execute(f"CREATE TABLE adult_test AS {render(query('adult_test'))}")
    fit = {s: float("inf") for s in STRUCTURES}
    score = dict(fit)
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    for _ in range(REPEATS):
        for s in STRUCTURES:
            t = time.perf_counter()
            model = sqlnb.fit("adult_train", label="income", con=con, bins="mdl", structure=s)
            fit[s] = min(fit[s], time.perf_counter() - t)
            t = time.perf_counter()
            model.score("adult_test", con=con, outputs=("proba",)).to_arrow_table()
            score[s] = min(score[s], time.perf_counter() - t)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print("| structure | fit (s) | fit / naive | score (s) | score / naive |")
    print("|---|---:|---:|---:|---:|")
    for s in STRUCTURES:
        print(f"| {s} | {fit[s]:.2f} | {fit[s] / fit['naive']:.1f} | {score[s]:.3f} | {score[s] / score['naive']:.1f} |")


if __name__ == "__main__":
    main()
