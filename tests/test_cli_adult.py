"""End to end on the real UCI adult data: the command line gives the Python API's numbers.

The raw files are materialised into a DuckDB database with the shared parsing queries
(``?`` as NULL, trimmed fields, the test labels' trailing dot removed); then
``sqlnb fit``/``score``/``evaluate`` run on ``adult.duckdb:adult_train`` and
``adult.duckdb:adult_test``, and their results are compared with ``sqlnb.fit``,
``model.score`` and ``sqlnb.workflows.evaluate.evaluate`` on the same tables, and the metrics
with scikit-learn's on the scored rows.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn import metrics
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.workflows.evaluate import evaluate
from sqlnb.source import Table
from support.cli import invoke
from support.shared_data import adult_test_query, adult_train_query, render, require_shared_data

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def adult_db(tmp_path_factory):
    require_shared_data("adult_train", "adult_test")
    path = tmp_path_factory.mktemp("adult") / "adult.duckdb"
    with duckdb.connect(str(path)) as con:
        for name, query in (("adult_train", adult_train_query()), ("adult_test", adult_test_query())):
            con.execute(render(exp.Create(this=sql.table(name), kind="TABLE", expression=query)))
    return path


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_adult_cli_equals_the_python_api(adult_db, tmp_path):
    db = str(adult_db)
    model_db = str(tmp_path / "models.duckdb")
    fit = invoke("fit", f"{db}:adult_train", "--label", "income", "--model", f"{model_db}:adult")
    assert fit.exit_code == 0, fit.stderr
    scored = tmp_path / "scored.parquet"
    score = invoke("score", f"{db}:adult_test", "--model", f"{model_db}:adult", "--out", scored)
    assert score.exit_code == 0, score.stderr
    ev_cli = json.loads(invoke("evaluate", f"{db}:adult_test", "--model", f"{model_db}:adult",
                               "--format", "json").stdout)

    with duckdb.connect(db, read_only=True) as con:
        model = sqlnb.fit(Table("adult_train"), "income", con=con)
        want = model.score(Table("adult_test"), con, outputs=("jll", "proba", "prediction")).to_arrow_table()
        ev_api = evaluate(model, Table("adult_test"), con)
    saved = sqlnb.load(model_db, "adult")
    assert saved.stats.n_rows == model.stats.n_rows == 32561
    assert [(f.name, f.kind) for f in saved.features] == [(f.name, f.kind) for f in model.features]

    got = pq.read_table(scored)
    assert got.num_rows == 16281
    assert got.column_names == [c for c in want.column_names if not c.startswith("jll_")]
    for c in ("proba_<=50K", "proba_>50K"):
        np.testing.assert_array_equal(np.array(got[c].to_pylist(), float), np.array(want[c].to_pylist(), float))
    assert got["prediction"].to_pylist() == want["prediction"].to_pylist()

    api = json.loads(json.dumps(ev_api.to_dict(), default=str))
    cli = dict(ev_cli)
    cli.pop("seconds"), api.pop("seconds")
    # the CLI's data check: adult.test spells the categories as adult.data does (no unseen majority)
    assert all(c["unseen"] <= 0.5 * c["values"] for c in cli.pop("unseen_categories"))
    # Means over 16k rows are summed by several threads in no fixed order, so they may
    # differ in the last bits between any two runs; everything else is identical.
    for key in ("log_loss", "brier", "roc_auc", "accuracy", "macro_f1", "weighted_f1", "macro_roc_auc",
                "weighted_roc_auc", "macro_average_precision", "weighted_average_precision", "ece"):
        assert cli.pop(key) == pytest.approx(api.pop(key), rel=1e-13, abs=0), key
    for key in ("per_class", "reliability"):  # per-class AUC and AP, bins' mean confidence: sums too
        got_rows, want_rows = cli.pop(key), api.pop(key)
        assert [r.keys() for r in got_rows] == [r.keys() for r in want_rows], key
        for a, b in zip(got_rows, want_rows):
            assert a == {k: pytest.approx(v, rel=1e-13, abs=0) if isinstance(v, float) else v
                         for k, v in b.items()}, key
    assert cli == api

    # ... and the numbers are scikit-learn's on the same scored rows.
    y = np.array(got["income"].to_pylist(), dtype=object)
    P = np.column_stack([np.array(got[c].to_pylist(), float) for c in ("proba_<=50K", "proba_>50K")])
    pred = np.array(got["prediction"].to_pylist(), dtype=object)
    assert ev_cli["rows"] == 16281 and ev_cli["no_proba_rows"] == 0 and ev_cli["unknown_label_rows"] == 0
    assert ev_cli["accuracy"] == pytest.approx(metrics.accuracy_score(y, pred), abs=1e-15)
    assert ev_cli["log_loss"] == pytest.approx(metrics.log_loss(y, P, labels=["<=50K", ">50K"]), rel=1e-12)
    assert ev_cli["brier"] == pytest.approx(metrics.brier_score_loss(y, P[:, 1], pos_label=">50K"), rel=1e-12)
    # ROC AUC ranks rows by log-odds, which keeps apart rows whose probability rounds to
    # exactly 0 or 1; ranking by p ties them (a slightly lower AUC here).
    log_odds = np.array(want["jll_>50K"].to_pylist(), float) - np.array(want["jll_<=50K"].to_pylist(), float)
    assert ev_cli["roc_auc"] == pytest.approx(metrics.roc_auc_score(y == ">50K", log_odds), abs=1e-13)
    assert ev_cli["roc_auc"] == pytest.approx(metrics.roc_auc_score(y == ">50K", P[:, 1]), abs=1e-4)
    assert ev_cli["confusion"]["counts"] == metrics.confusion_matrix(y, pred, labels=["<=50K", ">50K"]).tolist()
    assert 0.8 < ev_cli["accuracy"] < 0.86  # mixed naive Bayes on adult: ~83 %
