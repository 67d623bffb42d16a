"""Cross-validation's figures computed without sqlnb.workflows.cv: the documented fold rule
written out in SQL and numpy, a model refitted from scratch on each fold's training rows,
measured by scikit-learn. The tests of ``cross_validate`` / ``sqlnb cv`` compare against it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from sklearn.metrics import accuracy_score, log_loss

import sqlnb


def oracle_folds(con, relation: str, label: str, folds: int, seed: int) -> tuple[pa.Table, np.ndarray]:
    """The rows of ``relation`` and each row's fold by the rule sqlnb/workflows/folds.py
    documents, written here without sqlnb: sort the rows by label, then by DuckDB's
    ``hash(<every column>, seed)``, and deal them to the folds in turn,
    ``fold = (position − 1) mod k``. Rows whose sort keys tie are identical (the hash
    covers every column), so which of them goes where cannot change a figure."""
    columns = [c for c in con.sql(f'SELECT * FROM "{relation}" LIMIT 0').columns]
    hashed = ", ".join(f'"{c}"' for c in columns)
    rows = con.sql(f'SELECT *, hash({hashed}, {int(seed)}) AS "__oracle_h" FROM "{relation}"').to_arrow_table()
    h = rows["__oracle_h"].to_numpy()
    y = rows[label].to_numpy(zero_copy_only=False)
    position = np.empty(len(h), dtype=np.int64)
    position[np.lexsort((h, y))] = np.arange(len(h))
    return rows.drop_columns(["__oracle_h"]), position % folds


def oracle_figures(model, held_out: pa.Table, label: str, con) -> dict:
    """Accuracy and log loss of ``model`` on ``held_out`` from its per-row predictions and
    probabilities, by scikit-learn (the definitions of sqlnb.workflows.evaluate): a row
    without probabilities (zero likelihood under MLE) is an error in accuracy and left out
    of the log loss."""
    scored = model.score(held_out, con, outputs=("proba", "prediction"), keep=[]).to_arrow_table()
    y = held_out[label].to_pylist()
    pred = scored["prediction"].to_pylist()
    P = np.array([scored[c].to_pylist() for c in model.proba_columns()], dtype=float).T
    has = ~np.isnan(P).any(axis=1)
    ll = (log_loss([v for v, ok in zip(y, has) if ok], y_proba=P[has], labels=model.classes)
          if has.any() else float("nan"))
    return {"accuracy": accuracy_score([repr(v) for v in y], [repr(v) for v in pred]), "log_loss": ll,
            "rows": len(y), "no_proba": int((~has).sum())}


def refit_figures(con, relation, label, folds, seed, model_kind="naive_bayes", params=None, **options):
    """Per fold of the documented fold rule (:func:`oracle_folds`): a model fitted from
    scratch on the other folds' rows, scored on the held-out rows, measured by scikit-learn
    (:func:`oracle_figures`). Nothing of sqlnb.workflows.cv is used."""
    rows, fold = oracle_folds(con, relation, label, folds, seed)
    out = []
    for i in range(folds):
        model = sqlnb.fit(rows.filter(pa.array(fold != i)), label, con=con, model=model_kind,
                          **options, **(params or {}))
        out.append(oracle_figures(model, rows.filter(pa.array(fold == i)), label, con))
    return out


def assert_matches_refits(con, result, relation, model_kind="naive_bayes", **options):
    """Every grid point's fold accuracies are those of a refit on the training folds, and
    its log losses agree within 1e-9; the folds hold the rows the documented rule puts there."""
    first = None
    for r in result.results:
        ref = refit_figures(con, relation, "y", result.folds, result.seed, model_kind, r["params"], **options)
        first = first or ref
        assert r["accuracy"] == [f["accuracy"] for f in ref]
        np.testing.assert_allclose(r["log_loss"], [f["log_loss"] for f in ref], rtol=0, atol=1e-9)
    assert result.fold_rows == [f["rows"] for f in first]
    return first
