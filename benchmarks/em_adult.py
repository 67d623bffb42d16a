"""Semi-supervised EM on UCI adult: accuracy with few labels, EM vs labelled-only.

For each number of labelled rows and each seed, draw that many rows of ``adult.data``
(``numpy.random.default_rng(seed).choice``, without replacement) as the labelled set;
every other row of ``adult.data``, without its label, is the unlabelled set. Fit naive
Bayes on the labelled rows only (``sqlnb.fit``) and by EM (``sqlnb.fit_em``, with
``unlabelled_weight`` 1 and 0.1), then measure accuracy on ``adult.test``. The model
is the mixed one of the shared data: 6 numeric columns Gaussian, 8 text columns
categorical. Progress goes to stderr, the markdown table to stdout.

Example
-------
python benchmarks/em_adult.py --labels 50 100 200 500 --seeds 0 1 2 3 4 --weights 1 0.01
python benchmarks/em_adult.py --features categorical --weights 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from support.shared_data import (  # noqa: E402
    ADULT_CATEGORICAL, ADULT_FEATURES, ADULT_NUMERIC, ADULT_TRAIN_ROWS, DATA_DIR, adult_test_query,
    adult_train_query, shared_data_available,
)

import sqlnb  # noqa: E402
from sqlnb import sql
from sqlnb.source import Table, resolve  # noqa: E402

LABEL = "income"


def create(con, name: str, query: exp.Expression) -> None:
    con.execute(sql.render(exp.Create(this=sql.table(name), kind="TABLE", replace=True, expression=query)))


def draw_split(con, n_labelled: int, seed: int) -> None:
    """Tables ``labelled`` (features + label) and ``unlabelled`` (features only)."""
    ids = np.random.default_rng(seed).choice(ADULT_TRAIN_ROWS, n_labelled, replace=False)
    con.register("chosen", pa.table({"row_id": pa.array(ids, pa.int64())}))
    member = exp.In(this=sql.col("row_id"), query=exp.select(sql.col("row_id")).from_(sql.table("chosen")).subquery())
    cols = [sql.col(c) for c in ADULT_FEATURES]
    create(con, "labelled", exp.select(*cols, sql.col(LABEL)).from_(sql.table("adult_train")).where(member))
    create(con, "unlabelled", exp.select(*cols).from_(sql.table("adult_train")).where(exp.Not(this=member.copy())))
    con.unregister("chosen")


def accuracy(con, model) -> float:
    scored = model.scoring_query(resolve(Table("adult_test"), con), ("prediction",), keep=[LABEL])
    hit = exp.Cast(this=exp.EQ(this=sql.col("prediction", "s"), expression=sql.col(LABEL, "s")),
                   to=exp.DataType.build("double"))
    q = exp.select(exp.Avg(this=hit)).from_(exp.Subquery(this=scored, alias=exp.TableAlias(this=sql.ident("s"))))
    return float(con.execute(sql.render(q)).fetchall()[0][0])


def summary(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=int, nargs="+", default=[50, 100, 200, 500])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--weights", type=float, nargs="+", default=[1.0, 0.1], help="unlabelled_weight values")
    ap.add_argument("--max-iter", type=int, default=50)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--features", nargs="+", default=["all"],
                    help="feature columns, or 'all' (default), 'categorical' or 'numeric'")
    args = ap.parse_args(argv)
    groups = {"all": list(ADULT_FEATURES), "categorical": list(ADULT_CATEGORICAL), "numeric": list(ADULT_NUMERIC)}
    features = groups[args.features[0]] if args.features[0] in groups else args.features
    if not shared_data_available("adult_train", "adult_test"):
        print(f"adult data not found under {DATA_DIR}", file=sys.stderr)
        return 1
    con = duckdb.connect()
    create(con, "adult_train", adult_train_query(row_id=True))
    create(con, "adult_test", adult_test_query())
    full = sqlnb.fit("adult_train", LABEL, con=con, features=features)
    print(f"all {ADULT_TRAIN_ROWS} rows labelled: accuracy {accuracy(con, full):.4f}", file=sys.stderr)

    rows = []
    for n in args.labels:
        base, em = [], {w: [] for w in args.weights}
        iters, secs = {w: [] for w in args.weights}, {w: [] for w in args.weights}
        for seed in args.seeds:
            draw_split(con, n, seed)
            base.append(accuracy(con, sqlnb.fit("labelled", LABEL, con=con, features=features)))
            for w in args.weights:
                start = time.perf_counter()
                model = sqlnb.fit_em("labelled", "unlabelled", label=LABEL, con=con, max_iter=args.max_iter,
                                     tol=args.tol, unlabelled_weight=w, features=features)
                secs[w].append(time.perf_counter() - start)
                em[w].append(accuracy(con, model))
                iters[w].append(model.report["em"]["iterations"])
                print(f"n={n} seed={seed} λ={w}: labelled-only {base[-1]:.4f}  EM {em[w][-1]:.4f}  "
                      f"({iters[w][-1]} iterations, {secs[w][-1]:.1f} s)", file=sys.stderr)
        rows.append([str(n), summary(base)] + [summary(em[w]) for w in args.weights]
                    + [" / ".join(f"{statistics.mean(iters[w]):.0f}" for w in args.weights),
                       " / ".join(f"{statistics.mean(secs[w]):.1f}" for w in args.weights)])

    lam = " / ".join(f"λ={w:g}" for w in args.weights)
    header = (["labelled rows", "labelled only"] + [f"EM λ={w:g}" for w in args.weights]
              + [f"EM iterations ({lam})", f"EM seconds ({lam})"])
    print(f"Features: {', '.join(features)}\n")
    print(f"Accuracy on adult.test ({len(args.seeds)} draws of labelled rows per size, mean ± sd; "
          f"all {ADULT_TRAIN_ROWS} rows labelled: {accuracy(con, full):.4f})\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
