"""Accuracy side by side: sqlnb's generative models against gradient boosting, random
forests and logistic regression, on the same rows and the same folds.

Data (``../shared/data``, read through tests/support/shared_data.py's queries; ``?`` is
NULL):

* ``adult-complete``: train on adult.data's rows without a missing value (30,162), test on
  adult.test's (15,060), the rows adult.names' figures are measured on.
* ``adult-all``: train on all 32,561 rows, test on all 16,281; a NULL contributes no term
  to a sqlnb model (it is marginalised), the peers take it as their own missing value.
* ``mushroom``, ``votes``, ``spambase``: stratified 5-fold cross-validation,
  ``StratifiedKFold(5, shuffle=True, random_state=0)`` over the rows in file order, the
  fold assignment fixed once per data set and given to every model.

Every choice is made on training rows only. A sqlnb model's smoothing α (and its structure,
for the "chosen by CV" row) is chosen by sqlnb's one-scan cross-validation
(:func:`sqlnb.cross_validate`, 5 folds, seed 0) on the training rows: inside each outer
training fold where the table is cross-validated (nested CV). Numeric columns are cut at
Fayyad & Irani's MDL points of the training rows (``bins="mdl"``). LightGBM's tuned row is
chosen the same way by scikit-learn's ``GridSearchCV`` (5-fold ``StratifiedKFold``,
seed 0) on the training rows. The figures: error (%) and log loss on the test rows (pooled
over the outer folds: each row is predicted once), and fit time, the wall seconds of
everything done on the training rows (inner CV and refit included), summed over folds.

Example
-------
PYTHONPATH=. python benchmarks/accuracy.py --out docs/accuracy.md                  # everything
PYTHONPATH=. python benchmarks/accuracy.py --datasets votes --models "naive Bayes" "LightGBM defaults"

``--out`` writes the tables into the page between its markers, from the JSON of raw
figures (``--json``, default ``docs/accuracy.json``) into which this run's figures are merged,
so a partial run updates only its own cells. ``--outer-folds`` runs some outer folds only
and ``--merge`` joins the JSON files of runs made apart (side by side, one per data set,
model or fold); a cell stays blank until every outer fold of its row is measured.
tests/test_accuracy_page.py checks the page against the JSON and reruns part of the votes
column.

Adding a model
--------------
A sqlnb model is one entry of :func:`sqlnb_candidates`: a name and the keyword arguments of
:func:`sqlnb.fit` (a list value is a grid searched by the inner CV, with :data:`ALPHAS`).
A peer is one entry of :data:`PEERS`: a name and a function ``(train, test) -> probabilities``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import sys
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# One OpenMP thread for every peer (scikit-learn's histogram gradient boosting, XGBoost,
# LightGBM): the same figures on any machine, and no threads spinning against each other
# on a loaded one (HistGradientBoosting took 170 s on votes' 348 rows with its default
# threads under a load of 25 on 2 cores). Set before the libraries load their runtime.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
from sqlglot import exp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

import sqlnb  # noqa: E402
from sqlnb.workflows.auto import describe  # noqa: E402
from sqlnb.workflows.evaluate import evaluate  # noqa: E402
from support import shared_data as sd  # noqa: E402

SEED, OUTER_FOLDS, INNER_FOLDS = 0, 5, 5
#: The smoothing values the inner CV chooses among, for every sqlnb model.
ALPHAS = (0.5, 1.0, 2.0)
DATASETS = ("adult-complete", "adult-all", "mushroom", "votes", "spambase")
PAGE = ROOT / "docs" / "accuracy.md"
JSON = ROOT / "docs" / "accuracy.json"
MARKERS = ("<!-- accuracy-figures:start -->", "<!-- accuracy-figures:end -->")


# -- the models ----------------------------------------------------------------------------
def sqlnb_candidates() -> list[tuple[str, dict]]:
    """sqlnb's models of the table: (row name, keyword arguments of :func:`sqlnb.fit`).

    A list value is searched by the inner CV on the training rows together with α over
    :data:`ALPHAS`; a value ``{"among": [names]}`` for ``structure`` is the row whose model is
    the one, among the named rows, with the best inner-CV accuracy (their CVs are reused:
    the same training rows give the same inner folds). ``select`` runs sqlnb's wrapper
    selection (:func:`sqlnb.select_features`, its keyword arguments) on the training rows
    first and fits on the features it keeps. A new model kind is one more line here.
    """
    mdl = {"bins": "mdl"}
    return [
        ("naive Bayes", {**mdl, "structure": "naive"}),
        ("TAN", {**mdl, "structure": "tan"}),
        ("AODE", {**mdl, "structure": "aode"}),
        ("KDB(2)", {**mdl, "structure": "kdb:2"}),
        ("TAN+KDB(2)+AODE", {**mdl, "structure": "tan+kdb:2+aode"}),
        # SKDB (sqlnb.models.naive_bayes.skdb): k <= 5 and the features by leave-one-out
        # inside each fit, alpha by the inner CV; one back-off pseudo-count m = 1, or (the
        # default) m per feature and depth by leave-one-out too
        ("SKDB (k, features by leave-one-out), back-off m = 1", {**mdl, "structure": "skdb", "backoff": 1.0}),
        ("SKDB, back-off by leave-one-out", {**mdl, "structure": "skdb"}),
        # ESKDB (sqlnb.models.naive_bayes.eskdb): 20 skdb members over perturbed structures,
        # at alpha 1 as fit --auto tries it (the members' back-off does the deep smoothing)
        ("ESKDB, 20 members", {**mdl, "structure": "eskdb", "alpha": [1.0]}),
        ("structure chosen by CV", {**mdl, "structure": {"among": ["naive Bayes", "TAN", "AODE", "KDB(2)",
                                                                    "TAN+KDB(2)+AODE"]}}),
        # WANBIA-C (sqlnb.models.naive_bayes.weighted): alpha 1, the weights' penalty chosen
        # by the inner CV (a grid, not the fit's own nested choice: one fit per point and fold)
        ("naive Bayes with learnt weights", {**mdl, "model": "weighted", "alpha": [1.0],
                                             "l2": [1e-1, 1e-2, 1e-3, 1e-4]}),
        ("TAN+KDB(2)+AODE on TAN-selected features",
         {**mdl, "structure": "tan+kdb:2+aode",
          "select": {"direction": "backward", "folds": 10, "structure": "tan", "bins": "mdl"}}),
        # sqlnb fit --auto (sqlnb.auto_fit), its default budget, on each training set
        ("sqlnb fit --auto", {"auto": True}),
    ]


#: Rows run on some data sets only, for the benchmark's time budget on a shared 2-core
#: machine: the wrapper selection inside every outer fold of the cross-validated sets (a
#: search nested in the CV), and AODE and the average on mushroom and spambase, whose
#: nested CV did not fit in the run (docs/accuracy.md gives what was measured).
ONLY = {"TAN+KDB(2)+AODE on TAN-selected features": ("adult-complete", "adult-all"),
        "AODE": ("adult-complete", "adult-all", "votes"),
        "TAN+KDB(2)+AODE": ("adult-complete", "adult-all", "votes"),
        "SKDB (k, features by leave-one-out), back-off m = 1": ("adult-complete", "votes"),
        "SKDB, back-off by leave-one-out": ("votes",)}


@dataclass
class Split:
    """One train/test pair of a data set: SELECTs of the features and the label, and the
    outer fold's number (0 for adult's one split)."""

    train: str
    test: str
    index: int = 0


@dataclass
class DataSet:
    """A data set's splits (one for adult, the outer folds otherwise) and its columns."""

    name: str
    label: str
    features: tuple[str, ...]
    numeric: tuple[str, ...]
    splits: list[Split]
    con: duckdb.DuckDBPyConnection

    def frame(self, query: str):
        """The rows of ``query`` as a pandas DataFrame: numeric columns float, the others
        pandas categories (filled in by :func:`_categorise`), the label as text."""
        df = self.con.sql(query).df()
        df[self.label] = df[self.label].astype(str)
        return df


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _select(table: str, columns, where: exp.Expression | None = None) -> str:
    q = exp.select(*(exp.column(_ident(c)) for c in columns)).from_(_ident(table))
    if where is not None:
        q = q.where(where)
    return q.order_by(exp.column(_ident("row_id"))).sql(dialect="duckdb")


def load(name: str, con: duckdb.DuckDBPyConnection, data_dir: Path | None = None) -> DataSet:
    """Read data set ``name`` into DuckDB tables and define its splits (module docstring)."""
    from sklearn.model_selection import StratifiedKFold

    base = "adult" if name.startswith("adult") else name
    key = "adult_train" if base == "adult" else base
    label = sd.LABEL_COLUMN[key]
    # file order (adult interleaves numeric and categorical columns; the others are one kind)
    features = sd.ADULT_FEATURES if base == "adult" else (*sd.NUMERIC_FEATURES[key], *sd.CATEGORICAL_FEATURES[key])
    columns = (*features, label, "row_id")

    def create(table: str, query: exp.Expression) -> None:
        keep = exp.select(*(exp.column(_ident(c)) for c in columns)).from_(
            exp.Subquery(this=query, alias=exp.TableAlias(this=_ident("s"))))
        con.execute(exp.Create(this=exp.Table(this=_ident(table)), kind="TABLE", replace=True,
                               expression=keep).sql(dialect="duckdb"))

    if base == "adult":
        complete = name == "adult-complete"
        create("acc_train", sd.adult_train_query(data_dir=data_dir, row_id=True, drop_missing=complete))
        create("acc_test", sd.adult_test_query(data_dir=data_dir, row_id=True, drop_missing=complete))
        splits = [Split(_select("acc_train", (*features, label)), _select("acc_test", (*features, label)))]
    else:
        create("acc_rows", sd.query(base, data_dir=data_dir, row_id=True))
        y = [str(v) for (v,) in con.execute(_select("acc_rows", (label,))).fetchall()]
        folds = np.empty(len(y), dtype=np.int64)
        splitter = StratifiedKFold(OUTER_FOLDS, shuffle=True, random_state=SEED)
        for k, (_, held) in enumerate(splitter.split(np.zeros(len(y)), y)):
            folds[held] = k
        con.execute("CREATE OR REPLACE TABLE acc_folds (row_id BIGINT, outer_fold BIGINT)")
        con.executemany("INSERT INTO acc_folds VALUES (?, ?)", [[i, int(f)] for i, f in enumerate(folds)])
        joined = exp.select("*").from_(_ident("acc_rows")).join(exp.Table(this=_ident("acc_folds")),
                                                                 using=[_ident("row_id")])
        con.execute(exp.Create(this=exp.Table(this=_ident("acc_cv")), kind="TABLE", replace=True,
                               expression=joined).sql(dialect="duckdb"))
        fold = exp.column(_ident("outer_fold"))
        splits = [Split(_select("acc_cv", (*features, label), exp.Not(this=fold.eq(exp.Literal.number(k)))),
                        _select("acc_cv", (*features, label), fold.eq(exp.Literal.number(k))), k)
                  for k in range(OUTER_FOLDS)]
    return DataSet(name, label, features, tuple(c for c in features if c in sd.NUMERIC_FEATURES[key]), splits, con)


# -- sqlnb ---------------------------------------------------------------------------------
def _grid(kwargs: dict) -> tuple[dict, dict]:
    """Split fit keyword arguments into fixed ones and the inner CV's grid."""
    fixed, grid = {}, {"alpha": list(ALPHAS)}
    for k, v in kwargs.items():
        if k == "select":
            continue
        (grid if isinstance(v, list) else fixed)[k] = v
    return fixed, grid


def fit_sqlnb(ds: DataSet, split: Split, kwargs: dict) -> dict:
    """Choose by inner CV on ``split.train`` and fit there: the CV result, the refitted model,
    the features and the seconds taken."""
    start = time.perf_counter()
    train = sqlnb.Query(split.train)
    features = list(ds.features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # notes that repeat on every fold
        if kwargs.get("auto"):  # the search's own CV (5 folds, seed 0) on the training rows
            found = sqlnb.auto_fit(train, ds.label, con=ds.con, folds=INNER_FOLDS, seed=SEED, features=features)
            return {"auto": found, "model": found.model, "features": features,
                    "seconds": time.perf_counter() - start}
        if "select" in kwargs:
            chosen = sqlnb.select_features(train, ds.label, con=ds.con, seed=SEED, features=features,
                                           **kwargs["select"])
            features = list(chosen.features)
        fixed, grid = _grid(kwargs)
        cv = sqlnb.cross_validate(train, ds.label, con=ds.con, folds=INNER_FOLDS, seed=SEED, grid=grid,
                                  features=features, **fixed)
    return {"cv": cv, "model": cv.best_model, "features": features, "seconds": time.perf_counter() - start}


def score_sqlnb(ds: DataSet, split: Split, model) -> tuple[float, float, int]:
    """Error, log loss and rows on ``split.test`` (sqlnb's evaluate, in SQL)."""
    e = evaluate(model, sqlnb.Query(split.test), con=ds.con)
    return 1.0 - e.accuracy, e.log_loss, e.labelled_rows


def _best(cv) -> dict:
    return next(r for r in cv.results if r["params"] == cv.best_params)


def run_sqlnb(ds: DataSet, names: list[str], log=print) -> dict:
    """Every sqlnb row of ``names`` (none choosing among others: :func:`chosen_among`) on
    every split of ``ds``: per split its test figures, seconds, choices and the chosen
    grid point's inner-CV accuracy and log loss."""
    wanted = dict(sqlnb_candidates())
    rows: dict[str, list] = {}
    for split in ds.splits:
        k = split.index
        for name in names:
            f = fit_sqlnb(ds, split, wanted[name])
            error, loss, n = score_sqlnb(ds, split, f["model"])
            if "auto" in f:  # the search's winner, as its table names it, and its CV figures
                best = {"mean_accuracy": f["auto"].best["accuracy"], "mean_log_loss": f["auto"].best["log_loss"]}
                choice = {"model": describe(f["auto"].best), "skipped": f["auto"].skipped}
                if f["auto"].best["model"] == "weighted":
                    choice["l2"] = f["model"].l2
            else:
                choice = dict(f["cv"].best_params)  # alpha, and l2 for the learnt weights
                best = _best(f["cv"])
            if "select" in wanted[name]:
                choice["features"] = f["features"]
            rows.setdefault(name, []).append({"fold": k, "error": error, "log_loss": loss, "rows": n,
                                              "seconds": f["seconds"], "chosen": choice,
                                              "cv_accuracy": best["mean_accuracy"],
                                              "cv_log_loss": best["mean_log_loss"]})
            log(f"{ds.name} fold {k}: {name}: error {100 * error:.2f} %, log loss {loss:.4f}, "
                f"{f['seconds']:.1f} s, {choice}")
    return rows


def among(name: str, dataset: str) -> list[str] | None:
    """The rows that row ``name`` chooses among on ``dataset`` (those run there), or None
    for a row fitted itself."""
    structure = dict(sqlnb_candidates()).get(name, {}).get("structure")
    if not isinstance(structure, dict):
        return None
    return [m for m in structure["among"] if dataset in ONLY.get(m, (dataset,))]


def chosen_among(members: dict[str, list]) -> list[dict]:
    """Per split, the figures of the member with the best inner-CV accuracy (ties: lower
    log loss; then the first listed), its seconds those of all members (all were fitted
    to choose)."""
    names = list(members)
    folds = []
    for k in range(len(members[names[0]])):
        best = max(names, key=lambda m: (members[m][k]["cv_accuracy"], -members[m][k]["cv_log_loss"],
                                         -names.index(m)))
        f = dict(members[best][k], seconds=sum(members[m][k]["seconds"] for m in names))
        f["chosen"] = {**f["chosen"], "structure": best}
        folds.append(f)
    return folds


# -- peers ---------------------------------------------------------------------------------
def _categorise(train, test, ds: DataSet):
    """Features of both frames with the categorical columns as pandas categories over the
    training rows' values (a value unseen there is missing in the test rows), the columns
    named ``f0``, ``f1``, ... (LightGBM refuses spambase's ``char_freq_[`` and the like)."""
    import pandas as pd

    xs = []
    for df in (train, test):
        x = df[list(ds.features)].copy()
        for c in ds.features:
            if c not in ds.numeric:
                x[c] = pd.Categorical(x[c], categories=sorted(train[c].dropna().unique()))
        xs.append(x.set_axis([f"f{i}" for i in range(len(ds.features))], axis=1))
    return xs


def _categorical(x) -> list[str]:
    return [c for c in x.columns if x[c].dtype == "category"]


def _one_hot(x, scale: bool):
    """A column transformer: categorical columns one-hot (a missing value is its own
    category), numeric ones as they are or standardised."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    categorical = _categorical(x)
    numeric = [c for c in x.columns if c not in categorical]
    parts = [("cat", make_pipeline(SimpleImputer(strategy="constant", fill_value="?"),
                                   OneHotEncoder(handle_unknown="ignore")), categorical)] if categorical else []
    if numeric:
        parts.append(("num", StandardScaler() if scale else "passthrough", numeric))
    return ColumnTransformer(parts)


def _objects(x):
    """Categorical columns as object (text, NaN for missing) for the one-hot encoder."""
    x = x.copy()
    for c in _categorical(x):
        x[c] = x[c].astype(object).where(x[c].notna(), np.nan)
    return x


def lightgbm_defaults(x, y):
    import lightgbm

    return lightgbm.LGBMClassifier(n_jobs=1, deterministic=True, verbose=-1).fit(x, y)


#: LightGBM's tuned row: num_leaves × (learning rate, trees), chosen by 5-fold CV.
LIGHTGBM_GRID = [{"num_leaves": [15, 31, 63], "learning_rate": [lr], "n_estimators": [trees]}
                 for lr, trees in ((0.1, 100), (0.05, 200), (0.025, 400))]


def lightgbm_tuned(x, y):
    import lightgbm
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    search = GridSearchCV(lightgbm.LGBMClassifier(n_jobs=1, deterministic=True, verbose=-1), LIGHTGBM_GRID,
                          cv=StratifiedKFold(INNER_FOLDS, shuffle=True, random_state=SEED), scoring="accuracy",
                          n_jobs=1)
    search.fit(x, y)
    return search.best_estimator_, {k: search.best_params_[k] for k in ("num_leaves", "learning_rate",
                                                                         "n_estimators")}


def xgboost_defaults(x, y):
    import xgboost

    return xgboost.XGBClassifier(enable_categorical=True, n_jobs=1, random_state=SEED).fit(x, y)


def hist_gradient_boosting(x, y):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=SEED).fit(x, y)


def random_forest(x, y):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(_one_hot(x, scale=False),
                          RandomForestClassifier(n_estimators=500, n_jobs=1, random_state=SEED))
    return _Objects(model.fit(_objects(x), y))


def logistic_regression(x, y):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(_one_hot(x, scale=True), LogisticRegression(max_iter=5000))
    return _Objects(model.fit(_objects(x), y))


class _Objects:
    """A one-hot pipeline that takes the categorised frame (its columns back to text)."""

    def __init__(self, model):
        self.model = model

    def predict_proba(self, x):
        return self.model.predict_proba(_objects(x))


#: The peers: row name -> (fit function (features, label codes) -> model or (model, its
#: choices), the library whose version the page names).
PEERS: dict[str, tuple[Callable, str]] = {
    "LightGBM defaults": (lightgbm_defaults, "lightgbm"),
    "LightGBM tuned by 5-fold CV": (lightgbm_tuned, "lightgbm"),
    "XGBoost defaults": (xgboost_defaults, "xgboost"),
    "HistGradientBoosting defaults": (hist_gradient_boosting, "sklearn"),
    "random forest, 500 trees, one-hot": (random_forest, "sklearn"),
    "logistic regression, one-hot, scaled": (logistic_regression, "sklearn"),
}


def run_peers(ds: DataSet, names: list[str], log=print) -> dict:
    """Every peer of ``names`` on every split of ``ds`` (the same rows as sqlnb's)."""
    from sklearn.metrics import log_loss

    rows: dict[str, list] = {}
    for split in ds.splits:
        k = split.index
        train, test = ds.frame(split.train), ds.frame(split.test)
        x_train, x_test = _categorise(train, test, ds)
        classes = sorted(train[ds.label].unique())
        y_train = np.searchsorted(classes, train[ds.label].to_numpy())
        y_test = np.searchsorted(classes, test[ds.label].to_numpy())
        for name in names:
            start = time.perf_counter()
            fitted = PEERS[name][0](x_train, y_train)
            seconds = time.perf_counter() - start
            model, choice = fitted if isinstance(fitted, tuple) else (fitted, {})
            proba = model.predict_proba(x_test)
            error = float(np.mean(np.argmax(proba, axis=1) != y_test))
            loss = float(log_loss(y_test, proba, labels=list(range(len(classes)))))
            rows.setdefault(name, []).append({"fold": k, "error": error, "log_loss": loss, "rows": len(y_test),
                                              "seconds": seconds, "chosen": choice})
            log(f"{ds.name} fold {k}: {name}: error {100 * error:.2f} %, log loss {loss:.4f}, {seconds:.1f} s")
    return rows


# -- figures, JSON and the page ------------------------------------------------------------
def pooled(folds: list[dict]) -> dict:
    """A row's figures over its splits: error and log loss over all test rows (each row is
    predicted once), seconds summed, the choices per split."""
    n = sum(f["rows"] for f in folds)
    return {"error": sum(f["error"] * f["rows"] for f in folds) / n,
            "log_loss": sum(f["log_loss"] * f["rows"] for f in folds) / n,
            "rows": n, "seconds": sum(f["seconds"] for f in folds), "folds": folds}


def model_names() -> list[str]:
    """Every row of the tables, in order: sqlnb's, then the peers."""
    return [n for n, _ in sqlnb_candidates()] + list(PEERS)


def run(datasets: list[str], models: list[str], data_dir: Path | None = None, log=print,
        outer_folds: list[int] | None = None) -> dict:
    """Figures of ``models`` on ``datasets``: ``{data set: {model: pooled figures}}``
    (of the outer folds ``outer_folds`` only, when given: runs made apart are merged by
    :func:`merged`)."""
    unknown = [m for m in models if m not in model_names()]
    if unknown:
        raise SystemExit(f"Error: unknown model {unknown[0]!r}; models are: {', '.join(model_names())}")
    ours = [m for m in models if m in dict(sqlnb_candidates())]
    peers = [m for m in models if m in PEERS]
    found = {}
    for name in datasets:
        con = duckdb.connect()
        ds = load(name, con, data_dir)
        if outer_folds is not None:
            ds.splits = [s for s in ds.splits if s.index in outer_folds]
        here = [m for m in ours if name in ONLY.get(m, (name,))]
        fitted = list(dict.fromkeys(n for m in here for n in (among(m, name) or [m])))
        rows = {**run_peers(ds, peers, log), **run_sqlnb(ds, fitted, log)}
        for m in here:
            if among(m, name) is not None:
                rows[m] = chosen_among({n: rows[n] for n in among(m, name)})
        found[name] = {m: pooled(rows[m]) for m in rows}
        con.close()
    return found


def versions() -> dict:
    """The versions of Python, sqlnb, DuckDB and every peer library installed."""
    out = {"python": platform.python_version(), "sqlnb": sqlnb.__version__, "duckdb": duckdb.__version__}
    for lib in ("lightgbm", "xgboost", "sklearn", "pandas"):
        try:
            out[lib] = importlib.import_module(lib).__version__
        except ImportError:
            out[lib] = None
    return out


def machine() -> str:
    """CPU model, cores and load average: the machine the times were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()}; load average at the start {load}"


def merged(parts: list[dict]) -> dict:
    """Figures of several runs, ``{"results": ..., "runs": ...}`` each, the later ones in
    place of the earlier ones; a run that no figure comes from any more is dropped."""
    data: dict = {"results": {}, "runs": []}
    for part in parts:
        for name, rows in part["results"].items():
            have = data["results"].setdefault(name, {})
            for model, f in rows.items():
                if model in have and "fold" in f["folds"][0] and "fold" in have[model]["folds"][0]:
                    folds = {g["fold"]: g for g in have[model]["folds"]} | {g["fold"]: g for g in f["folds"]}
                    f = dict(pooled([folds[k] for k in sorted(folds)]), run=max(f["run"], have[model]["run"]))
                have[model] = f
        data["runs"] += [r for r in part["runs"] if r not in data["runs"]]
    for dataset, rows in data["results"].items():  # rows chosen among others, from their figures
        for name in model_names():
            members = among(name, dataset)
            if members and all(m in rows and "cv_accuracy" in rows[m]["folds"][0] for m in members) \
                    and len({len(rows[m]["folds"]) for m in members}) == 1:
                derived = pooled(chosen_among({m: rows[m]["folds"] for m in members}))
                rows[name] = dict(derived, run=max(rows[m]["run"] for m in members))
    used = {f["run"] for rows in data["results"].values() for f in rows.values()}
    used |= {g["run"] for rows in data["results"].values() for f in rows.values() for g in f["folds"] if "run" in g}
    data["runs"] = [r for r in data["runs"] if r["run"] in used]
    return data


def _complete(f: dict | None, dataset: str) -> bool:
    return f is not None and len(f["folds"]) == (1 if dataset.startswith("adult") else OUTER_FOLDS)


def cell(f: dict | None, dataset: str = "votes") -> str:
    """A table cell: error % and log loss (blank until every outer fold is measured)."""
    return f"{100 * f['error']:.2f} % ({f['log_loss']:.4f})" if _complete(f, dataset) else ""


def seconds_cell(f: dict | None, dataset: str) -> str:
    return f"{f['seconds']:.1f}" if _complete(f, dataset) else ""


def tables(results: dict) -> str:
    """The page's block: error (log loss) per model and data set, then fit seconds."""
    sets = [d for d in DATASETS if d in results]
    head = "| model | " + " | ".join(sets) + " |\n|---|" + "---:|" * len(sets)
    rows = [m for m in model_names() if any(m in results[d] for d in sets)]
    accuracy = [f"| {m} | " + " | ".join(cell(results[d].get(m), d) for d in sets) + " |" for m in rows]
    times = [f"| {m} | " + " | ".join(seconds_cell(results[d].get(m), d) for d in sets) + " |" for m in rows]
    return ("Error on the test rows, log loss in brackets:\n\n" + head + "\n" + "\n".join(accuracy)
            + "\n\nFit seconds (everything done on the training rows, inner CV included; summed over the "
            "5 outer folds where the table is cross-validated):\n\n" + head + "\n" + "\n".join(times))


def provenance(runs: list[dict]) -> str:
    """With what and where the figures were measured: the library versions, the machine
    and its load average (1 minute) at each run's start."""
    loads = [float(re.search(r"load average at the start ([0-9.]+)", r["machine"]).group(1)) for r in runs]
    lines = [f"Measured in {len(runs)} runs (split by data set, model and outer fold to run side by side), "
             f"load average {min(loads):.0f} to {max(loads):.0f} at their starts, on:", ""]
    seen = []
    for r in runs:
        v = ", ".join(f"{k} {x}" for k, x in r["versions"].items() if x)
        where = r["machine"].split("; load average")[0]
        if (v, where) not in seen:
            seen.append((v, where))
            lines.append(f"* {where}; {v}")
    return "\n".join(lines)


def shown(text: str) -> str | None:
    """The text between the page's markers (None when they are missing)."""
    m = re.search(re.escape(MARKERS[0]) + r"\n(?:(.*?)\n)?" + re.escape(MARKERS[1]), text, re.S)
    return (m.group(1) or "") if m else None


def replaced(text: str, block: str) -> str:
    start, end = MARKERS
    return re.sub(re.escape(start) + r"\n(?:.*?\n)?" + re.escape(end), lambda _: f"{start}\n{block}\n{end}",
                  text, flags=re.S)


def table_cells(block: str) -> dict[tuple[str, str], str]:
    """The first table of a block as ``{(model, data set): cell}``."""
    lines = [ln for ln in block.split("\n\n")[1].splitlines()]
    sets = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    out = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        out.update({(cells[0], d): c for d, c in zip(sets, cells[1:])})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="models: " + "; ".join(model_names()))
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--models", nargs="+", default=model_names(), metavar="MODEL")
    ap.add_argument("--out", type=Path, help="the page whose marked block is rewritten (docs/accuracy.md)")
    ap.add_argument("--json", type=Path, default=JSON, help=f"raw figures, merged (default {JSON.relative_to(ROOT)})")
    ap.add_argument("--data-dir", type=Path, default=sd.DATA_DIR, help="the shared UCI data (../shared/data)")
    ap.add_argument("--outer-folds", nargs="+", type=int, metavar="K",
                    help="run these outer folds only (0-4; runs made apart are merged into --json)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="JSON",
                    help="run nothing: merge these JSON files (runs made apart) into --json and write the page")
    args = ap.parse_args(argv)
    if args.merge:
        return write(merged([json.loads(p.read_text()) for p in args.merge]), args.json, args.out)
    meta = {"datasets": args.datasets, "models": args.models, "machine": machine(), "versions": versions(),
            "run": uuid.uuid4().hex[:12]}  # names the run its figures come from
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    found = run(args.datasets, args.models, args.data_dir, log, args.outer_folds)
    for rows in found.values():
        for f in rows.values():
            f["run"] = meta["run"]
            for g in f["folds"]:
                g["run"] = meta["run"]
    old = [json.loads(args.json.read_text())] if args.json.exists() else []
    write(merged([*old, {"results": found, "runs": [meta]}]), args.json, args.out)


def write(data: dict, json_path: Path, page: Path | None) -> None:
    """Store the raw figures, print the tables and write them into ``page``'s block."""
    json_path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    block = tables(data["results"]) + "\n\n" + provenance(data["runs"])
    print(block)
    if page:
        text = page.read_text()
        if shown(text) is None:
            raise SystemExit(f"Error: {page} has no {MARKERS[0]} ... {MARKERS[1]} block; add the markers")
        page.write_text(replaced(text, block))


if __name__ == "__main__":
    main()
