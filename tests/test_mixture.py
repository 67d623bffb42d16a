"""The average of structures (``structure="tan+kdb:2+aode"``, :mod:`sqlnb.models.naive_bayes.mixture`):
its joint is the mean of the joints its members give alone, within 1e-9,
on data with NULLs, rare and unseen values and a Gaussian column; refusals in one line;
update = refit and the stored round trip; the exported SELECT in SQLite; cross-validation
equal to fold-by-fold fits; the command line."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from support.cli import invoke
from support.structured import (CLASSES, DISCRETE, assert_cv_accuracy_is_fold_fits, assert_engine_proba,
                                class_scores, cli_files, kdb_table, registered, sqlite_input)

KINDS = {**DISCRETE, "g": "gaussian"}


@pytest.fixture(scope="module")
def data():
    return registered(kdb_table(800, 1), kdb_table(300, 2, unseen=True))


def fit(con, structure, data="train", kinds=KINDS, **params):
    return sqlnb.fit(data, label="y", con=con, features=list(kinds), feature_kinds=kinds, structure=structure,
                     **params)


def scored(model, data, con, what="jll") -> np.ndarray:
    return class_scores(model, data, con, what)


@pytest.mark.parametrize("structure,params", [("tan+kdb:2+aode", {}),
                                              ("naive+tan+kdb:1+kdb:2+aode", {"alpha": 0.5, "beta": (2.0, 1.0)}),
                                              ("kdb:1+kdb:2", {"alpha": 3.0, "estimator": "map"}),
                                              ("aode+kdb:2", {"alpha": 0.5})])
def test_joint_is_the_mean_of_the_members_joints(data, structure, params):
    """ln p(c, x) = ln((1/S) Σ_s p_s(c, x)), each p_s from a fit with that structure alone."""
    con, _, _ = data
    model = fit(con, structure, **params)
    got = scored(model, "test", con)
    members = [scored(fit(con, s, **params), "test", con) for s in structure.split("+")]
    want = np.logaddexp.reduce(np.stack(members), axis=0) - np.log(len(members))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    for m in members:  # the members differ, so the average is none of them
        assert np.max(np.abs(got - m)) > 1e-3
    proba = scored(model, "test", con, "proba")
    np.testing.assert_allclose(proba, np.exp(want - np.logaddexp.reduce(want, axis=1, keepdims=True)),
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize("structure,words", [("tan+tan", "once"), ("tan+foo", "'foo' cannot be averaged"),
                                             ("tan+", "'' cannot be averaged"), ("kdb:3+tan", "'kdb:3'")])
def test_bad_structures_are_refused_in_one_line(data, structure, words):
    con, _, _ = data
    with pytest.raises(SqlnbError, match=words) as e:
        fit(con, structure)
    assert "\n" not in str(e.value)


def test_zero_probabilities_explain_and_select_are_refused(data):
    con, _, _ = data
    with pytest.raises(SqlnbError, match="probability 0 .*smooth") as e:
        fit(con, "tan+aode", estimator="mle").log_parameters()
    assert "\n" not in str(e.value)
    with pytest.raises(SqlnbError, match="no per-feature breakdown"):
        fit(con, "tan+aode").feature_terms()
    with pytest.raises(SqlnbError, match="one structure, not the average"):
        sqlnb.select_features("train", "y", con=con, folds=3, features=list(DISCRETE), feature_kinds=DISCRETE,
                              structure="tan+aode")


def test_update_equals_refit_and_round_trips(data, tmp_path):
    con, train, _ = data
    con.register("first", train.slice(0, 500))
    con.register("rest", train.slice(500))
    updated = sqlnb.update(fit(con, "tan+kdb:2+aode", "first"), "rest", con=con)
    refit = fit(con, "tan+kdb:2+aode")
    assert set(refit.stats.pairs.joints)  # the kdb:2 member's joint counts were gathered
    np.testing.assert_allclose(scored(updated, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)
    path = str(tmp_path / "m.duckdb")
    updated.save(path, "mix")
    loaded = sqlnb.load(path, "mix")
    assert loaded.hyper.structure == "tan+kdb:2+aode"
    np.testing.assert_allclose(scored(loaded, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)


def test_export_runs_in_sqlite(data):
    con, _, test = data
    lite = sqlite_input(test)
    model = fit(con, "tan+kdb:2+aode")
    query = model.to_sql("sqlite", source="input", outputs=("proba",), key="rid")
    got = np.array([r[-3:] for r in lite.execute(query).fetchall()], dtype=float)
    np.testing.assert_allclose(got, scored(model, "test", con, "proba"), rtol=0, atol=1e-12)


@pytest.mark.postgres
def test_fit_and_score_in_postgres(data):
    """Fitted by PostgreSQL itself (pair and joint counts there) and scored there by the
    exported SELECT: DuckDB's probabilities within 1e-12, rows in key order."""
    from support.engines import postgres_engine
    con, train, test = data
    want = scored(fit(con, "tan+kdb:2+aode", kinds=DISCRETE), "test", con, "proba")
    with postgres_engine({"train": train, "test": test}) as engine:
        got = fit(engine, "tan+kdb:2+aode", kinds=DISCRETE).score("test", con=engine, outputs=("proba",), key="rid")
        assert_engine_proba(got, want, CLASSES, 1e-12)


@pytest.mark.spark  # starts a Spark session
def test_fit_and_score_in_spark(data):
    """The same on Spark: fitted there (its pair and joint counts), scored by the Spark SQL
    SELECT, DuckDB's probabilities within 1e-12, one row per input row."""
    from support.engines import spark_engine
    con, train, test = data
    want = scored(fit(con, "tan+kdb:2+aode", kinds=DISCRETE), "test", con, "proba")
    with spark_engine({"train": train, "test": test}) as engine:
        got = fit(engine, "tan+kdb:2+aode", kinds=DISCRETE).score("test", con=engine, outputs=("proba",), key="rid")
        assert_engine_proba(got, want, CLASSES, 1e-12)  # a Spark DataFrame, in key order


def test_cross_validation_equals_fold_by_fold_fits(data):
    """Each fold's averaged model (its members' structures from the other folds' counts)
    scores the held-out fold as a fit on the other folds does, in the pooled query."""
    con, _, _ = data
    assert_cv_accuracy_is_fold_fits(con, ["tan+kdb:2+aode", "kdb:1+aode"], DISCRETE,
                                    lambda source, structure: fit(con, structure, source, kinds=DISCRETE))


def test_cli_fit_and_cv(tmp_path):
    train = kdb_table(400, 5)
    db, args = cli_files(tmp_path, train, DISCRETE)
    r = invoke("fit", str(tmp_path / "all.parquet"), *args, "--structure", "tan+kdb:2+aode", "--model", f"{db}:m")
    assert r.exit_code == 0, r.stderr
    con = duckdb.connect()
    con.register("t", train)
    want = fit(con, "tan+kdb:2+aode", "t", kinds=DISCRETE)
    np.testing.assert_allclose(scored(sqlnb.load(db, "m"), "t", con), scored(want, "t", con), rtol=0, atol=1e-9)
    r = invoke("show", "--model", f"{db}:m", "--params")  # each member's parents, as fitted alone
    assert r.exit_code == 0, r.stderr
    tree = {s: fit(con, s, "t", kinds=DISCRETE).tree() for s in ("tan", "kdb:2")}
    for s, parents in tree.items():
        line = next(x for x in r.stdout.splitlines() if x.strip().startswith(s + " "))
        for c, p in parents.items():
            assert f"{c} <- {p if isinstance(p, str) else ', '.join(p)}" in line
    r = invoke("cv", str(tmp_path / "all.parquet"), "--label", "y", "--features", "a,e,noise", "--folds", "3",
               "--grid", "structure=tan,tan+aode")
    assert r.exit_code == 0, r.stderr
    assert "structure=tan+aode" in r.stdout
    r = invoke("fit", str(tmp_path / "all.parquet"), *args, "--structure", "tan+bogus", "--model", f"{db}:bad")
    assert r.exit_code != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "'bogus' cannot be averaged" in r.stderr


@pytest.mark.shared_data
def test_adult_cv_choice_meets_the_pages_error_bar():
    """The CV choice of docs/generative_adult.md ("Averaged structures"): fitted on adult.data,
    its error on the 15,060 complete test rows is the page's 13.23 %, at most 13.3 %."""
    from pathlib import Path

    from sqlnb.workflows.evaluate import evaluate
    from support import shared_data as sd
    sd.require_shared_data("adult")
    con = duckdb.connect()
    model = sqlnb.fit(sqlnb.Query(sd.render(sd.adult_train_query())), "income", con=con, bins="mdl",
                      structure="tan+kdb:2+aode", alpha=0.5,
                      features=["age", "workclass", "fnlwgt", "education-num", "occupation", "relationship",
                                "capital-gain", "capital-loss"])
    result = evaluate(model, sqlnb.Query(sd.render(sd.adult_test_query(drop_missing=True))), con=con)
    error = 100 * (1 - result.accuracy)
    assert error <= 13.3
    page = (Path(__file__).resolve().parents[1] / "docs" / "generative_adult.md").read_text(encoding="utf-8")
    assert f"| {error:.2f} % | 12.79 % | 12.86 % |" in page
