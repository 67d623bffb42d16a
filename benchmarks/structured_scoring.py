"""One-row scoring of the structured naive Bayes kinds on scikit-learn's breast cancer.

Each kind (naive Bayes, TAN, KDB(1), KDB(2), AODE and averages of structures) is derived
from one fit of the 30 numeric columns with MDL bins (``bins="mdl"``, every column a
discrete feature of the structures); KDB(4), ``skdb`` and ``eskdb`` (whose deep tables or
patterns only a fit of their own structure gathers) and weighted naive Bayes (``model="weighted"``, its penalty
given) are fitted on their own. Then, in this process:

* ``score``: ``model.score(one_row).to_arrow_table()`` on a one-row Arrow table, each call
  building, rendering and running the scoring SELECT;
* ``estimator``: ``predict_proba`` of one row through the scikit-learn estimator of the
  kind, after a first call (the estimator keeps the rendered SELECT, so this is DuckDB's
  binding, planning and running of it);
* the size of the SELECT DuckDB is given when the model scores in place (its tables bound
  as parameters, :func:`sqlnb.sql.render_bound`) and of the exported one
  (``model.to_sql("duckdb")``, its tables as literals, :func:`sqlnb.sql.packed_list`).

Times are medians of ``--repeat`` calls, wall clock and the process's CPU (all threads);
on a loaded machine the CPU figure is the steadier one. Run it at two commits for a
before/after table.

Example
-------
python benchmarks/structured_scoring.py --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import time

WEIGHTED_L2 = 0.01  # the weights' penalty, given: choosing it by CV is the fit's cost, not scoring's
KINDS = ["naive", "weighted", "tan", "kdb:1", "kdb:2", "kdb:4", "skdb", "eskdb", "aode", "tan+kdb:2", "tan+kdb:2+aode"]


def breast_cancer():
    """(training table with label ``y``, features as a numpy array, labels)."""
    import pyarrow as pa
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    names = [n.replace(" ", "_") for n in data.feature_names]
    table = pa.table({**{n: data.data[:, j] for j, n in enumerate(names)}, "y": [str(v) for v in data.target]})
    return table, data.data, data.target


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``repeat`` calls of ``fn`` after one untimed call."""
    fn()
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def estimator(kind: str):
    """The scikit-learn estimator of ``kind`` (MDL bins, its default)."""
    from sqlnb.estimators import (AveragedOneDependenceNB, AveragedStructuresNB, EnsembleSelectiveKDependenceNB,
                                  KDependenceNB, MixedNB, SelectiveKDependenceNB, TreeAugmentedNB, WeightedNB)
    if kind == "naive":
        return MixedNB(bins="mdl")
    if kind == "weighted":
        return WeightedNB(l2=WEIGHTED_L2)
    if kind == "skdb":
        return SelectiveKDependenceNB()
    if kind == "eskdb":
        return EnsembleSelectiveKDependenceNB()
    if kind == "tan":
        return TreeAugmentedNB()
    if kind.startswith("kdb:") and "+" not in kind:
        return KDependenceNB(k=int(kind[4:]))
    if kind == "aode":
        return AveragedOneDependenceNB()
    return AveragedStructuresNB(structures=kind)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per figure (median)")
    parser.add_argument("--kinds", nargs="*", default=KINDS, help=f"structures to time (default: {' '.join(KINDS)})")
    parser.add_argument("--no-estimator", action="store_true", help="leave out the estimators' predict_proba")
    args = parser.parse_args(argv)

    import duckdb

    import sqlnb
    from sqlnb import sql
    from sqlnb.engines.duckdb import DuckDBEngine
    from sqlnb.models.naive_bayes import eskdb, skdb
    from sqlnb.source import read_with

    train, X, y = breast_cancer()
    one = train.drop(["y"]).slice(0, 1)
    base = sqlnb.fit(train, label="y", bins="mdl", structure="tan+kdb:2+aode")  # every kind's counts
    con = duckdb.connect()
    con.register("one", one)
    print("| kind | score wall s | score CPU s | estimator wall s | estimator CPU s | scoring SQL kB "
          "| exported SQL MB |")
    print("|---|---|---|---|---|---|---|")
    for kind in args.kinds:
        if kind == "weighted":
            model = sqlnb.fit(train, label="y", model="weighted", l2=WEIGHTED_L2)
        elif skdb.deep(kind) or eskdb.ensemble(kind):  # deep tables, patterns: a fit of their own structure
            model = sqlnb.fit(train, label="y", bins="mdl", structure=kind)
        else:
            model = base.with_params(structure=kind)
        text = model.to_sql("duckdb", source="one", con=con, pretty=False)
        source = DuckDBEngine(con).resolve(read_with("one", model.read_types()))
        scoring, _ = sql.render_bound(model.scoring_query(source, nan_gate=True, dialect="duckdb"))
        sw, sc = timed(lambda: model.score(one).to_arrow_table(), args.repeat)
        ew = ec = float("nan")
        if not args.no_estimator:
            est = estimator(kind).fit(X, y)
            ew, ec = timed(lambda: est.predict_proba(X[:1]), args.repeat)
        print(f"| {kind} | {sw:.3f} | {sc:.3f} | {ew:.3f} | {ec:.3f} | {len(scoring) / 1e3:.1f} | {len(text) / 1e6:.3f} |",
              flush=True)


if __name__ == "__main__":
    main()
