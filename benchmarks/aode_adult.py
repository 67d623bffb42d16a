"""AODE (``structure="aode"``) against naive Bayes, TAN and KDB(2) on UCI adult.

``error``: test error (%) on adult.test's 15,060 complete rows (no NULL in any column) and
on all 16,281, of models fitted on adult.data with ``bins="mdl"``: naive Bayes, TAN and
AODE with the frequency limit m in ``--m`` (default 1 and 30); with ``--select``, also
AODE inside backward wrapper selection (10 folds, seed 0, as docs/generative_adult.md's
TAN selection). ``time``: seconds (best of ``--repeat``) to fit each structure (naive, tan,
aode, kdb:2) on adult.data (32,561 rows) and to score adult.test (16,281 rows) into a
temporary table, wall and CPU (user + sys of this process, DuckDB's threads included).
``scale``: the same at ``--rows`` generated rows (default 10M) of 8 categorical columns of
2–12 values, each drawn from the label with probability 0.3 or from the previous column
with 0.3 (so the pairs matter), in a DuckDB table; with ``--data PATH`` the rows are
generated once into that DuckDB file and read from it by later runs. ``wide``: AODE's
scoring SELECT (its size, and its scoring time) at ``--features`` generated categorical
columns of 2–5 values (default 57, spambase's width) and ``--rows`` rows.

Example
-------
python benchmarks/aode_adult.py error --m 1,30 --select
python benchmarks/aode_adult.py time --repeat 3
python benchmarks/aode_adult.py scale --rows 10000000 --repeat 1 --data /tmp/aode_10m.duckdb
python benchmarks/aode_adult.py wide --features 57 --rows 100000
"""

from __future__ import annotations

import argparse
import resource
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


STRUCTURES = ("naive", "tan", "aode", "kdb:2")


def cpu() -> float:
    """User + system CPU seconds of this process so far (DuckDB's threads included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def best(fn, repeat: int) -> tuple[float, float]:
    """The fastest of ``repeat`` runs: (wall, CPU) seconds."""
    out = []
    for _ in range(repeat):
        t, c = time.perf_counter(), cpu()
        fn()
        out.append((time.perf_counter() - t, cpu() - c))
    return min(out)


def timed(con, table: str, label: str, repeat: int, title: str, **options) -> None:
    """Fit and score each structure on ``table``; one Markdown row each."""
    print(f"| structure | fit {title} wall | fit CPU | score wall | score CPU | scoring SQL |")
    print("|---|---|---|---|---|---|")
    for structure in STRUCTURES:
        fit = best(lambda: sqlnb.fit(table, label, con=con, structure=structure, **options), repeat)
        model = sqlnb.fit(table, label, con=con, structure=structure, **options)
        query = model.to_sql("duckdb", source=table, con=con, pretty=False)

        def score():
            con.execute(f"CREATE OR REPLACE TEMP TABLE scored AS {query}")
        sc = best(score, repeat)
        print(f"| {structure} | {fit[0]:.2f} s | {fit[1]:.2f} s | {sc[0]:.2f} s | {sc[1]:.2f} s | "
              f"{len(query) / 1e6:.3f} MB |", flush=True)


def run_time(repeat: int) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE train AS {sd.render(sd.adult_train_query())}")
    con.execute(f"CREATE TABLE test AS {sd.render(sd.adult_test_query())}")
    print("adult.data 32,561 rows (fit), adult.test 16,281 rows (score), MDL bins")
    print("| structure | fit wall | fit CPU | score wall | score CPU | scoring SQL |")
    print("|---|---|---|---|---|---|")
    for structure in STRUCTURES:
        fit = best(lambda: sqlnb.fit("train", "income", con=con, bins="mdl", structure=structure), repeat)
        model = sqlnb.fit("train", "income", con=con, bins="mdl", structure=structure)
        query = model.to_sql("duckdb", source="test", con=con, pretty=False)

        def score():
            con.execute(f"CREATE OR REPLACE TEMP TABLE scored AS {query}")
        sc = best(score, repeat)
        print(f"| {structure} | {fit[0]:.2f} s | {fit[1]:.2f} s | {sc[0]:.2f} s | {sc[1]:.2f} s | "
              f"{len(query) / 1e6:.3f} MB |", flush=True)


def generate(con, rows: int, sizes: list[int], classes: int = 3, table: str = "big") -> None:
    """``rows`` rows of categorical columns c0, c1, … (``sizes`` values each) and a label y:
    each column from the label with probability 0.3, from the previous column with 0.3,
    else uniform."""
    cols = [f"(hash(i, 99) % {classes})::BIGINT AS y"]
    for j, v in enumerate(sizes):
        # from the label, from the previous column (DuckDB reads an earlier alias), or uniform
        u = f"(hash(i, {j}) % 1000) / 1000.0"
        prev = "y" if j == 0 else f"x{j - 1}"
        cols.append(f"(CASE WHEN {u} < 0.3 THEN y % {v} WHEN {u} < 0.6 THEN {prev} % {v} "
                    f"ELSE hash(i, {j + 20}) % {v} END)::BIGINT AS x{j}")
    text = ", ".join(f"'v' || x{j} AS c{j}" for j in range(len(sizes)))
    con.execute(f"CREATE TABLE {table} AS SELECT y, {text} FROM (SELECT {', '.join(cols)} FROM range({rows}) t(i))")


def run_scale(rows: int, repeat: int, data: str | None) -> None:
    if data is not None and Path(data).exists():
        con = duckdb.connect(data, read_only=True)
        have = con.execute("SELECT count(*) FROM big").fetchone()[0]
        if have != rows:
            sys.exit(f"{data} holds {have:,} rows, not --rows {rows:,}: remove it or give another path")
    else:
        con = duckdb.connect(data or ":memory:")
        generate(con, rows, [2, 3, 4, 5, 6, 8, 10, 12])
        if data is not None:
            con.close()
            con = duckdb.connect(data, read_only=True)
    timed(con, "big", "y", repeat, f"{rows:,} rows x 8 categorical")


def run_wide(features: int, rows: int, repeat: int) -> None:
    """AODE at ``features`` categorical columns: the SQL's size and the scoring time.

    The pair scan refuses more than ``tan.MAX_FEATURES`` discrete features:
    raised here for this measurement only."""
    from sqlnb.models.naive_bayes import tan
    tan.MAX_FEATURES = max(tan.MAX_FEATURES, features)
    con = duckdb.connect()
    generate(con, rows, [2 + j % 4 for j in range(features)], classes=2)
    print(f"| structure | F | rows | fit wall | fit CPU | score wall | score CPU | scoring SQL | built in |")
    print("|---|---|---|---|---|---|---|---|---|")
    for structure in ("naive", "tan", "aode"):
        fit = best(lambda: sqlnb.fit("big", "y", con=con, structure=structure), repeat)
        model = sqlnb.fit("big", "y", con=con, structure=structure)
        t = time.perf_counter()
        query = model.to_sql("duckdb", source="big", con=con, pretty=False)
        built = time.perf_counter() - t

        def score():
            con.execute(f"CREATE OR REPLACE TEMP TABLE scored AS {query}")
        sc = best(score, repeat)
        print(f"| {structure} | {features} | {rows:,} | {fit[0]:.2f} s | {fit[1]:.2f} s | {sc[0]:.2f} s | "
              f"{sc[1]:.2f} s | {len(query) / 1e6:.3f} MB | {built:.2f} s |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("error", "time", "scale", "wide"))
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--m", default="1,30", help="AODE frequency limits, comma-separated")
    p.add_argument("--select", action="store_true", help="also AODE inside backward wrapper selection")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--data", help="scale: a DuckDB file the generated rows are written to once and read from")
    p.add_argument("--features", type=int, default=57, help="wide: how many categorical columns")
    a = p.parse_args()
    if a.what == "error":
        run_error([float(m) for m in a.m.split(",")], a.select)
    elif a.what == "time":
        run_time(a.repeat)
    elif a.what == "scale":
        run_scale(a.rows, a.repeat, a.data)
    else:
        run_wide(a.features, a.rows, a.repeat)


if __name__ == "__main__":
    main()
