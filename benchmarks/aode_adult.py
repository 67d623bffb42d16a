"""AODE (``structure="aode"``, issue 30) against naive Bayes and TAN on UCI adult.

``error``: test error (%) on adult.test's 15,060 complete rows (no NULL in any column) and
on all 16,281, of models fitted on adult.data with ``bins="mdl"``: naive Bayes, TAN and
AODE with the frequency limit m in ``--m`` (default 1 and 30); with ``--select``, also
AODE inside backward wrapper selection (10 folds, seed 0, as docs/generative_adult.md's
TAN selection). ``time``: seconds (best of ``--repeat``) to fit each structure on adult.data
(32,561 rows) and to score adult.test (16,281 rows) into a temporary table. ``scale``: the
same at ``--rows`` generated rows (default 10M) of 8 categorical columns of 2–12 values,
each drawn from the label with probability 0.3 or from the previous column with 0.3 (so
the pairs matter), in a DuckDB table.

Example
-------
python benchmarks/aode_adult.py error --m 1,30 --select
python benchmarks/aode_adult.py time --repeat 3
python benchmarks/aode_adult.py scale --rows 10000000 --repeat 1
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from support import shared_data as sd  # noqa: E402

import sqlnb  # noqa: E402
from sqlnb.errors import ScreeningWarning  # noqa: E402
from sqlnb.workflows.evaluate import evaluate  # noqa: E402

warnings.simplefilter("ignore", ScreeningWarning)


def sources():
    return (sqlnb.Query(sd.render(sd.adult_train_query())),
            sqlnb.Query(sd.render(sd.adult_test_query(drop_missing=True))),
            sqlnb.Query(sd.render(sd.adult_test_query())))


def errors(model, con) -> tuple[float, float, int]:
    _, complete, every = sources()
    c, a = evaluate(model, complete, con=con), evaluate(model, every, con=con)
    return 100 * (1 - c.accuracy), 100 * (1 - a.accuracy), c.labelled_rows


def run_error(ms: list[float], select: bool) -> None:
    con = duckdb.connect()
    train, _, _ = sources()
    print("| model | error, complete test rows | error, all test rows |")
    print("|---|---|---|")
    tan = sqlnb.fit(train, "income", con=con, bins="mdl", structure="tan")
    rows = [("naive Bayes, MDL bins", tan.with_params(structure="naive")), ("TAN, MDL bins", tan)]
    rows += [(f"AODE, MDL bins, m = {m:g}", tan.with_params(structure="aode", aode_min_count=m)) for m in ms]
    for name, model in rows:
        c, a, n = errors(model, con)
        print(f"| {name} | {c:.2f} % ({n:,} rows) | {a:.2f} % |", flush=True)
    if select:
        for m in ms:
            s = sqlnb.select_features(train, "income", con=con, direction="backward", folds=10, seed=0, bins="mdl",
                                      structure="aode", aode_min_count=m)
            c, a, _ = errors(s.model, con)
            print(f"| AODE with wrapper selection (backward), MDL bins, m = {m:g} | {c:.2f} % | {a:.2f} % | "
                  f"CV {100 * s.path[s.chosen]['error']:.2f} %, {len(s.features)}: {', '.join(s.features)}",
                  flush=True)


def best(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def run_time(repeat: int) -> None:
    con = duckdb.connect()
    train, _, every = sources()
    con.execute(f"CREATE TABLE train AS {sd.render(sd.adult_train_query())}")
    con.execute(f"CREATE TABLE test AS {sd.render(sd.adult_test_query())}")
    print("| structure | fit adult.data (32,561 rows) | score adult.test (16,281 rows) |")
    print("|---|---|---|")
    for structure in ("naive", "tan", "aode"):
        fit = best(lambda: sqlnb.fit("train", "income", con=con, bins="mdl", structure=structure), repeat)
        model = sqlnb.fit("train", "income", con=con, bins="mdl", structure=structure)

        def score():
            con.execute(f"CREATE OR REPLACE TEMP TABLE scored AS {model.to_sql('duckdb', source='test', con=con)}")
        print(f"| {structure} | {fit:.2f} s | {best(score, repeat):.2f} s |", flush=True)


def run_scale(rows: int, repeat: int) -> None:
    con = duckdb.connect()
    sizes = [2, 3, 4, 5, 6, 8, 10, 12]
    cols = ["(hash(i, 99) % 3)::BIGINT AS y"]
    for j, v in enumerate(sizes):
        # from the label, from the previous column (DuckDB reads an earlier alias), or uniform
        u = f"(hash(i, {j}) % 1000) / 1000.0"
        prev = "y" if j == 0 else f"x{j - 1}"
        cols.append(f"(CASE WHEN {u} < 0.3 THEN y % {v} WHEN {u} < 0.6 THEN {prev} % {v} "
                    f"ELSE hash(i, {j + 20}) % {v} END)::BIGINT AS x{j}")
    text = ", ".join(f"'v' || x{j} AS c{j}" for j in range(len(sizes)))
    con.execute(f"CREATE TABLE big AS SELECT y, {text} FROM (SELECT {', '.join(cols)} FROM range({rows}) t(i))")
    print(f"| structure | fit {rows:,} rows x 8 categorical | score {rows:,} rows |")
    print("|---|---|---|")
    for structure in ("naive", "tan", "aode"):
        fit = best(lambda: sqlnb.fit("big", "y", con=con, structure=structure), repeat)
        model = sqlnb.fit("big", "y", con=con, structure=structure)

        def score():
            con.execute(f"CREATE OR REPLACE TEMP TABLE scored AS {model.to_sql('duckdb', source='big', con=con)}")
        print(f"| {structure} | {fit:.2f} s | {best(score, repeat):.2f} s |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("error", "time", "scale"))
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--m", default="1,30", help="AODE frequency limits, comma-separated")
    p.add_argument("--select", action="store_true", help="also AODE inside backward wrapper selection")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    if a.what == "error":
        run_error([float(m) for m in a.m.split(",")], a.select)
    elif a.what == "time":
        run_time(a.repeat)
    else:
        run_scale(a.rows, a.repeat)


if __name__ == "__main__":
    main()
