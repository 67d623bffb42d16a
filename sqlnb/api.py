"""The Python API: fit a model on a source, load and list saved models.

Data flow::

    source ──fit.statistics_query──▶ Statistics ──Hyperparameters──▶ log-parameters
           (one GROUP BY scan)        (parameter tables)              ──score.scoring_select──▶ predictions
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import duckdb

from .fit import collect_statistics, plan_features
from .naive_bayes import Hyperparameters, NaiveBayes
from .source import resolve
from .store import drop_model, list_models, load_model


def fit(
    data: Any,
    label: str,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    kind: str = "auto",
    feature_kinds: Mapping[str, str] | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    weight: str | None = None,
    binarize: float | Mapping[str, float] = 0.0,
    **hyperparameters: Any,
) -> NaiveBayes:
    """Fit a naive Bayes classifier in the database.

    Parameters
    ----------
    data : str, Table, Query, Files, path, relation or Arrow table
        The training rows: a table or view name, a SQL query, or Parquet/CSV/JSON files
        by path or glob. Only aggregates leave the database.
    label : str
        The label column; rows where it is NULL are skipped and counted.
    con : duckdb connection, optional
        A connection that can see ``data`` (default: a new in-memory one, enough for files).
    kind : str
        Family of every feature (``auto`` picks one from each column's type).
    feature_kinds : mapping, optional
        Per-column family overrides.
    features, exclude : list of str, optional
        Which columns are features (default: all but the label and weight).
    weight : str, optional
        A column of non-negative row weights.
    binarize : float or mapping
        Bernoulli threshold (``x > threshold`` is present), per column or for all.
    **hyperparameters
        Fields of :class:`~sqlnb.naive_bayes.Hyperparameters` (``alpha``,
        ``estimator``, ``class_prior``, ``var_smoothing``, ...).

    Returns
    -------
    NaiveBayes

    Examples
    --------
    >>> import sqlnb
    >>> model = sqlnb.fit("train.parquet", label="y")          # doctest: +SKIP
    >>> model.predict_proba("test.parquet").to_arrow_table()   # doctest: +SKIP
    """
    hyper = Hyperparameters(**hyperparameters)
    con = con if con is not None else duckdb.connect()
    start = time.perf_counter()
    source = resolve(data, con)
    feats = plan_features(source, label, weight, kind, feature_kinds, features, exclude, binarize)
    stats = collect_statistics(con, source, label, feats, weight)
    report = {
        "source": source.description,
        "rows": stats.n_rows,
        "null_label_rows": stats.null_label_rows,
        "seconds": round(time.perf_counter() - start, 3),
    }
    return NaiveBayes(label, source.columns[label], feats, stats, hyper, report, weight)


def load(target: Any, name: str):
    """Load a saved model.

    Parameters
    ----------
    target : str, path or duckdb connection
        The database holding the model.
    name : str
        The model's name.
    """
    return load_model(target, name)


def models(target: Any) -> list[dict]:
    """The models saved in a database."""
    return list_models(target)


def drop(target: Any, name: str) -> None:
    """Delete a saved model."""
    drop_model(target, name)
