"""Naive Bayes with learnt weights (``model="weighted"``) against naive Bayes: fit and score
times on generated categorical data (benchmarks/generate.py's ``categorical`` shape), and the
two ways of fitting the weights the design weighed.

Rows
----
naive Bayes fit          ``sqlnb.fit(bins="mdl")``: the statistics scan (what the weighted fit starts from)
weighted fit, l2 given   naive Bayes's fit + one scan of the (label, value positions) patterns
                         (the rows themselves, ungrouped, when the first 200,000 hardly repeat)
                         + Newton's method on them in numpy
weighted fit, l2 by CV   + the fold deal (in numpy, from the patterns) and 5 folds × 5 λ fits
pattern scan             the aggregate scan (GROUP BY) alone, and how many distinct patterns it returns
scan per iteration       (``--scan-evals N``) the alternative: L-BFGS (scipy) whose every evaluation
                         is one aggregate SQL statement over the rows, the scoring SELECT of the
                         current weights grouped by GROUPING SETS of each feature, returning the
                         loss and the gradient; run for at most N evaluations from all weights 1,
                         with the largest distance of its weights from the Newton fit's
naive Bayes / weighted   the scoring SELECT of each: ``SUM`` of a probability (one scoring scan)
scoring                  and the rows written to a DuckDB table

Every row prints the 1-minute load average when it ends. ``--skew LO HI`` generates the
columns with generate.py's ``--skew`` (``16 32``: a dominant level per column and class, so
rows repeat value combinations; the default, every row nearly a pattern of its own).

Examples
--------
python benchmarks/weighted_fit.py --rows 1000000 --features 8 --classes 3 --repeat 1 --cv --scan-evals 40
python benchmarks/weighted_fit.py --rows 10000000 --repeat 1 --cv --skew 16 32
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402

import sqlnb  # noqa: E402
from sqlnb import sql  # noqa: E402
from sqlnb.engines import as_engine  # noqa: E402
from sqlnb.models.finish import class_columns  # noqa: E402
from sqlnb.models.naive_bayes import weighted  # noqa: E402
from sqlnb.source import read_with  # noqa: E402


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def scan_objective(engine, source, nb, l2: float):
    """``beta -> (L, ∇L)`` of the weighted objective, each call one aggregate statement over
    the rows of ``source``: the scoring SELECT of the weights ``beta`` (its log-probabilities),
    summed by GROUPING SETS of each feature (the gradient's (value, class) sums of
    ``P_k − [y = k]``) and over all rows (the loss ``−ln P_y`` and the log-priors' sums)."""
    names, K = [f.name for f in nb.features], len(nb.classes)
    label = nb.label
    prior, tables = weighted._tables(nb)
    logp = class_columns("log_proba_", nb.classes)
    at = {n: {v: i for i, v in enumerate(nb.stats.features[n].values)} for n in names}
    sums = []
    for k, c in enumerate(nb.classes):
        hit = exp.case().when(sql.col(label).eq(sql.value(c)), sql.dbl(1.0)).else_(sql.dbl(0.0))
        sums.append(exp.alias_(exp.Sum(this=exp.Exp(this=sql.col(logp[k])) - hit), f"r{k}", quoted=True))
    loss = exp.case()
    for k, c in enumerate(nb.classes):
        loss = loss.when(sql.col(label).eq(sql.value(c)), exp.Neg(this=sql.col(logp[k])))
    group = exp.Group(expressions=[exp.GroupingSets(expressions=[
        *(exp.Paren(this=sql.col(n)) for n in names), exp.Tuple(expressions=[])])])
    keys = [exp.alias_(exp.Anonymous(this="GROUPING", expressions=[sql.col(n)]), f"g{j}", quoted=True)
            for j, n in enumerate(names)]

    def value_grad(beta: np.ndarray) -> tuple[float, np.ndarray]:
        model = weighted.WeightedNaiveBayes.from_naive_bayes(nb, l2, beta)
        scored = model.scoring_query(source, outputs=("log_proba",), keep=[label, *names])
        query = exp.select(*keys, *(sql.col(n) for n in names), *sums,
                           exp.alias_(exp.Sum(this=loss.copy()), "loss", quoted=True),
                           exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True)).from_(
            scored.subquery("s"))
        query.set("group", group.copy())
        grad = [np.zeros(K)] + [np.zeros((K, len(at[n]))) for n in names]
        total = rows = None
        for r in engine.execute(query):
            flags, values, res = r[:len(names)], r[len(names):2 * len(names)], r[2 * len(names):2 * len(names) + K]
            if all(flags):  # the grand total
                total, rows = r[-2], r[-1]
                grad[0] = np.array(res)
                continue
            j = flags.index(0)
            if values[j] is not None and values[j] in at[names[j]]:
                grad[1 + j][:, at[names[j]][values[j]]] = res
        g = np.concatenate([grad[0] * prior] + [(grad[1 + j] * t).ravel() for j, t in enumerate(tables)]) / rows
        d = beta - 1.0
        return total / rows + 0.5 * l2 * float(d @ d), g + l2 * d

    return value_grad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", default="/tmp/sqlnb-weighted-bench")
    ap.add_argument("--skew", type=float, nargs=2, default=None, metavar=("LO", "HI"),
                    help="generate.py's --skew for the columns (default: its own)")
    ap.add_argument("--cv", action="store_true", help="also the fit with l2 chosen by cross-validation (slow)")
    ap.add_argument("--scan-evals", type=int, default=0, metavar="N",
                    help="also the scan-per-iteration optimiser, for at most N evaluations (needs scipy)")
    args = ap.parse_args(argv)
    name = f"categorical-{args.rows}-{args.features}-{args.classes}"
    if args.skew is not None:
        name += f"-skew{args.skew[0]:g}-{args.skew[1]:g}"
    out = Path(args.data_dir) / name
    if not (out / "meta.json").exists():
        generate.generate("categorical", args.rows, args.features, args.classes, out,
                          **({} if args.skew is None else {"skew": tuple(args.skew)}))
    data = str(out / "*.parquet")
    con = duckdb.connect()
    rows = []

    def row(what, seconds, note=""):
        load = os.getloadavg()[0]
        rows.append((what, seconds, note, load))
        print(f"{what:<32} {seconds:8.2f} s  {note}  (load {load:.1f})", flush=True)

    l2 = 1e-3
    t, nb = best(lambda: sqlnb.fit(data, "label", con=con, bins="mdl"), args.repeat)
    row("naive Bayes fit", t)
    t, w = best(lambda: sqlnb.fit(data, "label", con=con, model="weighted", l2=l2), args.repeat)
    row("weighted fit, l2 given", t, f"l2 = {l2:g}, {w.report['patterns']:,} patterns")
    if args.cv:
        t, wcv = best(lambda: sqlnb.fit(data, "label", con=con, model="weighted"), 1)
        row("weighted fit, l2 by CV", t, f"l2 = {wcv.l2:g}")
    engine = as_engine(con)
    source = engine.resolve(read_with(data, keep_text=("label",)))
    t, patterns = best(lambda: weighted.read_patterns(engine, source, "label", None, w.features, w.stats),
                       args.repeat)
    row("pattern scan", t, f"{len(patterns.y):,} patterns")
    if args.scan_evals:
        from scipy.optimize import minimize
        star = np.concatenate([w.prior_weights] + [w.weights[f.name].ravel() for f in w.features])
        objective = scan_objective(engine, source, w.naive_bayes(), l2)
        calls = []

        def counted(beta):
            calls.append(1)
            return objective(beta)

        t = time.perf_counter()
        res = minimize(counted, np.ones(len(star)), jac=True, method="L-BFGS-B",
                       options={"maxfun": args.scan_evals, "maxiter": args.scan_evals, "gtol": 1e-12, "ftol": 0.0})
        t = time.perf_counter() - t
        row("scan per iteration (L-BFGS)", t, f"{len(calls)} scans ({t / len(calls):.2f} s each), "
            f"max |w - w_newton| = {np.max(np.abs(res.x - star)):.1e}")
    con.execute(f"CREATE OR REPLACE VIEW data AS SELECT * FROM read_parquet('{data}')")
    for label, model in (("naive Bayes", nb), ("weighted", w)):
        select = model.to_sql("duckdb", source="data", con=con, outputs=("proba", "prediction"))
        first = model.proba_columns()[0]  # summed, so that the probabilities are computed (COUNT(*) is not)
        t, _ = best(lambda: con.sql(f'SELECT SUM("{first}") FROM ({select})').fetchall(), args.repeat)
        row(f"{label}: one scoring scan", t)
        t, _ = best(lambda: con.execute(f"CREATE OR REPLACE TABLE scored AS {select}"), args.repeat)
        row(f"{label} scoring to a table", t)
    print(json.dumps({"rows": args.rows, "features": args.features, "classes": args.classes, "skew": args.skew,
                      "results": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
