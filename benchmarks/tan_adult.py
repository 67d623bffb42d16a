"""Tree-augmented naive Bayes (``structure="tan"``) against naive Bayes on UCI data.

``adult``: test error (%) on ``adult.test``, on all rows and on complete rows (no NULL in
any column), of naive Bayes and TAN fitted on ``adult.data`` with the numeric columns
(1) Gaussian, (2) in equal-frequency bins and (3) in Fayyad & Irani (1993) MDL bins — both
bin sets cut on the training rows by this script, in numpy, as text categories, until
sqlnb bins columns itself — and (4) TAN on the MDL bins with backward elimination of
features judged on a holdout of the training rows (every third row), the chosen features
then refitted on all training rows. ``small``: 10-fold cross-validated error on mushroom
and votes (``sqlnb.cross_validate``, grid over ``structure``). ``cost``: seconds (best of
3) of the pair scan against the per-column count scans, on adult and mushroom repeated
to ~325,000 rows.

Example
-------
python benchmarks/tan_adult.py adult
python benchmarks/tan_adult.py small cost
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

import duckdb
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from support.shared_data import ADULT_FEATURES, ADULT_NUMERIC, query, render  # noqa: E402

import sqlnb  # noqa: E402
from sqlnb.errors import ScreeningWarning  # noqa: E402

warnings.simplefilter("ignore", ScreeningWarning)


def entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def mdl_cuts(x: np.ndarray, y: np.ndarray, K: int) -> list[float]:
    """Fayyad & Irani's recursive entropy split with the MDL stopping rule."""
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    out: list[float] = []

    def split(lo: int, hi: int) -> None:
        xs, n = x[lo:hi], hi - lo
        cand = np.nonzero(xs[1:] != xs[:-1])[0]
        if n < 2 or len(cand) == 0:
            return
        cum = np.zeros((n, K))
        cum[np.arange(n), y[lo:hi]] = 1
        cum = cum.cumsum(0)
        tot = cum[-1]
        e, i = min((((i + 1) * entropy(cum[i]) + (n - i - 1) * entropy(tot - cum[i])) / n, i) for i in cand)
        left, right = cum[i], tot - cum[i]
        k, k1, k2 = (tot > 0).sum(), (left > 0).sum(), (right > 0).sum()
        delta = math.log2(3 ** k - 2) - (k * entropy(tot) - k1 * entropy(left) - k2 * entropy(right))
        if entropy(tot) - e <= (math.log2(n - 1) + delta) / n:
            return
        out.append(float((xs[i] + xs[i + 1]) / 2))
        split(lo, lo + i + 1)
        split(lo + i + 1, hi)

    split(0, len(x))
    return sorted(out)


def binned(con, cuts: dict[str, list[float]], table: str) -> str:
    cols = []
    for c, cs in cuts.items():
        whens = " ".join(f"WHEN \"{c}\" <= {b!r} THEN 'b{i:02d}'" for i, b in enumerate(cs))
        cols.append(f"CASE WHEN \"{c}\" IS NULL THEN NULL {whens} ELSE 'b{len(cs):02d}' END AS \"{c}\"")
    return f"SELECT * REPLACE ({', '.join(cols)}) FROM {table}"


def error(model, table: str, con) -> float:
    rows = model.score(table, con=con, outputs=("prediction",), keep=["income"]).fetchall()
    return 100.0 * sum(a != b for a, b in rows) / len(rows)


def adult() -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE train AS {render(query('adult_train'))}")
    con.execute(f"CREATE TABLE test AS {render(query('adult_test'))}")
    num = list(ADULT_NUMERIC)
    labels = np.array([r[0] == ">50K" for r in con.execute("SELECT income FROM train").fetchall()], dtype=int)
    quantile = {}
    mdl = {}
    for c in num:
        x = np.array([r[0] for r in con.execute(f'SELECT "{c}" FROM train').fetchall()], dtype=float)
        quantile[c] = sorted(set(np.quantile(x, np.arange(1, 20) / 20).tolist()))
        mdl[c] = mdl_cuts(x, labels, 2)
    for name, cuts in (("q", quantile), ("m", mdl)):
        for part in ("train", "test"):
            con.execute(f"CREATE TABLE {part}_{name} AS {binned(con, cuts, part)}")
    for t in ("test", "test_q", "test_m"):
        con.execute(f"CREATE VIEW {t}_complete AS SELECT * FROM {t} WHERE COLUMNS(*) IS NOT NULL")
    print(f"MDL bins per column: {({c: len(v) + 1 for c, v in mdl.items()})}")
    print("| numeric columns | model | error, complete rows | error, all rows |\n|---|---|---|---|")
    for label, suffix in (("Gaussian", ""), ("20 equal-frequency bins", "_q"), ("MDL bins", "_m")):
        for structure in ("naive", "tan"):
            m = sqlnb.fit(f"train{suffix}", "income", con=con, structure=structure, features=list(ADULT_FEATURES))
            print(f"| {label} | {structure} | {error(m, f'test{suffix}_complete', con):.2f} % "
                  f"| {error(m, f'test{suffix}', con):.2f} % |", flush=True)
    # Backward elimination, judged on every third training row.
    con.execute("CREATE TABLE numbered AS SELECT row_number() OVER () AS i, * FROM train_m")
    con.execute("CREATE VIEW fit_part AS SELECT * EXCLUDE (i) FROM numbered WHERE i % 3 <> 0")
    con.execute("CREATE VIEW val_part AS SELECT * EXCLUDE (i) FROM numbered WHERE i % 3 = 0")

    def holdout(fs):
        return error(sqlnb.fit("fit_part", "income", con=con, features=fs, structure="tan"), "val_part", con)

    chosen = [c for c in ADULT_FEATURES if c != "fnlwgt"]  # a single MDL bin: constant, left out anyway
    best = holdout(chosen)
    while len(chosen) > 2:
        e, f = min((holdout([g for g in chosen if g != f]), f) for f in chosen)
        if e > best:
            break
        chosen.remove(f)
        best = e
    m = sqlnb.fit("train_m", "income", con=con, features=chosen, structure="tan")
    print(f"| MDL bins, TAN + backward elimination on a training holdout: {', '.join(chosen)} | tan "
          f"| {error(m, 'test_m_complete', con):.2f} % | {error(m, 'test_m', con):.2f} % |")
    print(f"tree: {m.tree()}")


def small() -> None:
    con = duckdb.connect()
    for name, label in (("mushroom", "class"), ("votes", "party")):
        con.execute(f"CREATE TABLE {name} AS SELECT row_number() OVER () AS rid, * FROM ({render(query(name))})")
        r = sqlnb.cross_validate(name, label, con=con, folds=10, key=["rid"], exclude=["rid"],
                                 grid={"structure": ["naive", "tan"]})
        for res in r.results:
            print(f"{name}: {res['params']['structure']} 10-fold error {100 * (1 - res['mean_accuracy']):.2f} %")


def cost() -> None:
    from sqlnb import sql
    from sqlnb.models.naive_bayes import tan
    from sqlnb.models.naive_bayes.fit import plan_features, statistics_query, weighted_counts_query
    from sqlnb.source import resolve
    con = duckdb.connect()
    con.execute(f"CREATE TABLE adult AS SELECT t.* FROM ({render(query('adult_train'))}) t, range(10)")
    con.execute(f"CREATE TABLE mushroom AS SELECT t.* FROM ({render(query('mushroom'))}) t, range(40)")

    def best(q: str) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            con.execute(q).fetchall()
            times.append(time.perf_counter() - start)
        return min(times)

    for name, label in (("adult", "income"), ("mushroom", "class")):
        src = resolve(name, con)
        feats = [f for f in plan_features(src, label) if f.kind == "categorical"]
        F, rows = len(feats), con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0]
        print(f"{name}: {rows:,} rows, {F} categorical columns ({F * (F - 1) // 2} pairs): "
              f"histogram scan {best(sql.render(statistics_query(src, label, None, feats))):.2f} s, "
              f"per-column GROUPING SETS {best(sql.render(weighted_counts_query(src, label, None, feats))):.2f} s, "
              f"pair GROUPING SETS {best(sql.render(tan.pairs_query(src, label, None, feats))):.2f} s", flush=True)


if __name__ == "__main__":
    for what in sys.argv[1:] or ["adult"]:
        {"adult": adult, "small": small, "cost": cost}[what]()
