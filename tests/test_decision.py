"""Decision rules inside the scoring SELECT (sqlnb/models/decision.py).

The oracle is numpy on the probabilities the same SELECT returns: the class of minimum
Σ_j p_j·L(j, k) (ties to the smallest class), Chow's reject option (0/1 costs: rejected
exactly where max p < 1 − R; general costs: where the minimum exceeds R), a threshold
p(CLASS) >= P. Every model kind, DuckDB, exported SQL in SQLite, PostgreSQL and Spark,
the stored rule, the command line, and expected cost and reject on adult against numpy.
"""

from __future__ import annotations

import json
import math

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.decision import DecisionRule
from sqlnb.workflows.evaluate import evaluate, text_report
from support.cli import assert_error, invoke, mixed_table, run_process, snapshot, write_parquet

N = 150


def _counts(n: int, classes: tuple) -> pa.Table:
    """Four count columns whose rates depend on an INTEGER label."""
    rng = np.random.default_rng(5)
    k = rng.integers(0, len(classes), n)
    cols = {f"t{j}": pa.array(rng.poisson(1 + 2 * (k == j % len(classes))), pa.int64()) for j in range(4)}
    return pa.table({"id": pa.array(np.arange(n), pa.int64()), **cols,
                     "y": pa.array(np.array(classes)[k].tolist(), pa.int32())})


DATA = {"three": mixed_table(N, seed=1), "two": mixed_table(N, seed=2, classes=("no", "yes")),
        "counts3": _counts(N, (1, 2, 3)), "counts2": _counts(N, (1, 2))}

#: kind -> (data of three classes, of two classes, fit arguments)
KINDS = {
    "naive_bayes": ("three", "two", dict(exclude=["id"])),  # gaussian + categorical + bernoulli, NULLs
    "multinomial": ("counts3", "counts2", dict(exclude=["id"], kind="multinomial")),
    "lda": ("three", "two", dict(model="lda", features=["x", "z"])),
    "qda": ("three", "two", dict(model="qda", features=["x", "z"])),
    "logistic": ("three", "two", dict(model="logistic", features=["x", "z"])),
}


def _rules3(classes):
    a, b, c = classes
    costs = {(a, b): 5.0, (c, a): 3.0, (b, b): 0.5, (a, c): 0.0}
    return [dict(costs=costs), dict(costs=costs, reject=0.4), dict(reject=0.3)]


def _rules2(classes):
    no, yes = classes
    return [dict(threshold=(yes, 0.3)), dict(threshold=(no, 0.8), reject=0.25), dict(costs={(yes, no): 5.0}),
            dict(reject=0.2), dict(costs={(yes, no): 5.0, (no, yes): 2.0}, reject=0.5)]


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    for name, t in DATA.items():
        con.register(name, t)
    yield con
    con.close()


@pytest.fixture(scope="module")
def models(duck):
    """(kind, data name) -> model, every kind on three classes and on two."""
    out = {}
    for kind, (three, two, kwargs) in KINDS.items():
        for name in (three, two):
            # LDA, QDA and logistic regression are fitted on complete rows; they score every
            # row, those with a NULL feature without probabilities.
            source = f'SELECT * FROM "{name}" WHERE "x" IS NOT NULL' if "model" in kwargs else name
            out[kind, name] = sqlnb.fit(source, "y", con=duck, **kwargs)
    return out


def _cases(models):
    for (kind, name), m in models.items():
        for rule in (_rules3 if len(m.classes) == 3 else _rules2)(list(m.classes)):
            yield kind, name, m, rule


# -- the oracle ----------------------------------------------------------------------------------------
def _probas(d: dict, model) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in d[c]] for c in model.proba_columns()], float).T


def oracle(rule: DecisionRule, P: np.ndarray, argmax: list) -> tuple[list, np.ndarray, list]:
    """(prediction, expected_cost, rejected) from the probabilities, in numpy."""
    n, K = P.shape
    ok = ~np.isnan(P).any(axis=1)
    L = rule.loss()
    classes = list(rule.classes)
    if rule.costs is not None:
        R = np.zeros((n, K))
        for k in range(K):  # the terms in class order, zero costs left out, as the SQL adds them
            for j in range(K):
                if L[j, k] != 0.0:
                    R[:, k] = R[:, k] + P[:, j] * L[j, k]
        idx = np.argmin(np.where(ok[:, None], R, 0.0), axis=1)  # the first of equal minima
        cost = R.min(axis=1)
        rejected = cost > rule.reject if rule.reject is not None else np.zeros(n, bool)
    else:
        maxp = P.max(axis=1)
        rejected = maxp < 1.0 - rule.reject if rule.reject is not None else np.zeros(n, bool)
        cost = 1.0 - maxp
        if rule.threshold is not None:
            i, p = rule.threshold
            idx = np.where(P[:, i] >= p, i, 1 - i)
            cost = np.where(rejected, cost, 1.0 - P[np.arange(n), np.where(ok, idx, 0)])
        else:
            idx = [classes.index(v) if v is not None else 0 for v in argmax]
    pred = [classes[i] if o and not r else None for i, o, r in zip(idx, ok, rejected)]
    cost = np.where(ok, cost, np.nan)
    rej = [bool(r) if o else None for r, o in zip(rejected, ok)] if rule.reject is not None else None
    return pred, cost, rej


def _check(got: dict, model, rule, argmax, where: str) -> None:
    P = _probas(got, model)
    pred, cost, rej = oracle(rule, P, argmax)
    assert got["prediction"] == pred, where
    np.testing.assert_array_equal(np.array([np.nan if v is None else v for v in got["expected_cost"]], float), cost,
                                  err_msg=where)
    if rej is None:
        assert "rejected" not in got, where
    else:
        assert [None if v is None else bool(v) for v in got["rejected"]] == rej, where


# -- DuckDB, every kind ----------------------------------------------------------------------------------
def test_every_kind_decides_as_numpy_does_from_its_probabilities(duck, models):
    seen = set()
    for kind, name, m, kw in _cases(models):
        m.decision = None
        plain = m.score(name, duck, keep=["id"]).to_arrow_table().to_pydict()
        rule = m.decision = DecisionRule.for_model(m, **kw)
        got = m.score(name, duck, keep=["id"]).to_arrow_table().to_pydict()
        m.decision = None
        where = f"{kind} on {name} with {kw}"
        assert got["id"] == list(range(N)), where  # one row per input row, in order
        for c in m.proba_columns():  # the rule changes no probability
            assert got[c] == plain[c], where
        assert list(got)[-3:] == ([c for c in plain][-1:] + ["expected_cost", "rejected"] if "reject" in kw
                                  else [c for c in plain][-2:] + ["expected_cost"]), where
        _check(got, m, rule, plain["prediction"], where)
        seen.add((kind, len(m.classes)))
        if kind in ("lda", "qda", "logistic"):  # a NULL feature: no probabilities, no decision
            assert any(v is None for v in got["expected_cost"]), where
    assert len(seen) == 2 * len(KINDS)


def test_a_rule_changes_the_decisions_it_should(duck, models):
    """Guards against an oracle that agrees with a rule doing nothing: a 1:5 cost makes
    more rows predict the costly class's opposite, a reject option rejects some rows."""
    m = models["naive_bayes", "two"]
    base = m.score("two", duck, outputs=("prediction",), keep=[]).fetchall()
    try:
        m.decision = DecisionRule.for_model(m, costs={("yes", "no"): 5.0})
        costly = m.score("two", duck, outputs=("prediction",), keep=[]).fetchall()
        m.decision = DecisionRule.for_model(m, reject=0.2)
        rejecting = m.score("two", duck, outputs=("prediction",), keep=[]).fetchall()
    finally:
        m.decision = None
    assert len(costly[0]) == 2 and len(rejecting[0]) == 3  # prediction, expected_cost (, rejected)
    assert sum(r[0] == "yes" for r in costly) > sum(r[0] == "yes" for r in base)
    assert 0 < sum(r[2] for r in rejecting) < N


def test_ties_go_to_the_smallest_class(duck, models):
    """Equal costs in every column: every expected loss is equal, the first class wins."""
    m = models["naive_bayes", "three"]
    m.decision = DecisionRule.for_model(m, costs=np.ones((3, 3)))
    try:
        got = m.score("three", duck, outputs=("prediction",), keep=[]).fetchall()
    finally:
        m.decision = None
    assert {r[0] for r in got} == {"a"}  # each row's three sums are the same sum
    assert all(abs(r[1] - 1.0) < 1e-15 for r in got)


def test_the_default_rule_leaves_the_sql_as_it_was(models):
    m = models["naive_bayes", "three"]
    before = [m.to_sql(d) for d in ("duckdb", "sqlite", "spark")]
    for kw in (dict(costs={}), dict(costs=1.0 - np.eye(3)), dict(costs={("a", "a"): 0.0, ("a", "b"): 1.0})):
        m.decision = DecisionRule.for_model(m, **kw)
        assert m.decision.is_default
        assert [m.to_sql(d) for d in ("duckdb", "sqlite", "spark")] == before
    m.decision = None


def test_a_source_column_named_like_a_decision_column_is_refused(duck, models):
    m = models["naive_bayes", "three"]
    duck.register("clash", DATA["three"].append_column("expected_cost", pa.array(np.zeros(N))))
    m.score("clash", duck).fetchall()  # no rule: the column is just a column
    m.decision = DecisionRule.for_model(m, reject=0.3)
    try:
        with pytest.raises(SqlnbError, match="expected_cost"):
            m.score("clash", duck)
    finally:
        m.decision = None


def test_invalid_rules_are_one_clear_error(models):
    m3, m2 = models["naive_bayes", "three"], models["naive_bayes", "two"]
    for model, kw, fragment in [
        (m3, dict(threshold=("a", 0.5)), "two classes"),
        (m2, dict(costs={("yes", "no"): 2.0}, threshold=("yes", 0.5)), "not both"),
        (m2, dict(threshold=("yes", 1.5)), "between 0 and 1"),
        (m2, dict(threshold="yes"), "CLASS=P"),
        (m2, dict(threshold=("maybe", 0.5)), "'maybe' is not a class"),
        (m2, dict(reject=-0.1), ">= 0"),
        (m2, dict(reject=float("nan")), "finite"),
        (m3, dict(costs={("a", "b"): -1.0}), ">= 0"),
        (m3, dict(costs={("a", "b"): float("inf")}), "finite"),
        (m3, dict(costs={("a", "x"): 2.0}), "'x' is not a class"),
        (m3, dict(costs=np.ones((2, 2))), "3x3"),
    ]:
        with pytest.raises(SqlnbError, match=fragment) as e:
            DecisionRule.for_model(model, **kw)
        assert "\n" not in str(e.value)


def test_labels_are_read_with_the_models_label_type(tmp_path, models):
    m = models["multinomial", "counts3"]  # INTEGER label 1, 2, 3
    path = tmp_path / "costs.csv"
    path.write_text("actual,predicted,cost\n01,2,5\n3, 1 ,2.5\n")
    rule = DecisionRule.for_model(m, costs=str(path))
    assert rule.loss().tolist() == [[0, 5, 1], [1, 0, 1], [2.5, 1, 0]]
    two = models["multinomial", "counts2"]
    assert DecisionRule.for_model(two, threshold="2=0.5").threshold == (1, 0.5)
    assert DecisionRule.for_model(two, threshold=(1, 0.25)).threshold == (0, 0.25)


# -- stored with the model ---------------------------------------------------------------------------
def test_the_rule_is_stored_with_every_kind_and_used_by_later_scores(duck, models, tmp_path):
    db = str(tmp_path / "models.duckdb")
    for (kind, name), m in models.items():
        kw = (_rules3 if len(m.classes) == 3 else _rules2)(list(m.classes))[1]
        m.decision = DecisionRule.for_model(m, **kw)
        want = m.score(name, duck, keep=["id"]).fetchall()
        m.save(db, f"{kind}-{name}")
        m.decision = None
        loaded = sqlnb.load(db, f"{kind}-{name}")
        assert loaded.decision == DecisionRule.for_model(loaded, **kw), kind
        assert loaded.score(name, duck, keep=["id"]).fetchall() == want, kind
    # saved without a rule: none when loaded
    models["lda", "two"].save(db, "plain")
    assert sqlnb.load(db, "plain").decision is None


# -- exported SQL: SQLite, PostgreSQL, Spark -------------------------------------------------------------
def _rows(names, rows) -> dict:
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _export_cases(models):
    """Costs with a reject option and a reject option alone (three classes), a threshold
    with a reject option (two classes)."""
    for (kind, name), m in models.items():
        rules = (_rules3 if len(m.classes) == 3 else _rules2)(list(m.classes))
        for rule in rules[1:3] if len(m.classes) == 3 else rules[1:2]:
            yield kind, name, m, rule


def _check_exported(duck, m, name, kw, got: dict, where: str) -> None:
    order = np.argsort(got["id"])
    got = {c: [v[i] for i in order] for c, v in got.items()}
    assert got["id"] == list(range(N)), where
    m.decision = None
    plain = m.score(name, duck, keep=["id"]).to_arrow_table().to_pydict()
    m.decision = DecisionRule.for_model(m, **kw)
    if isinstance(m.classes[0], str) is False:  # SQLite gives an INTEGER label back as is
        got["prediction"] = [None if v is None else type(m.classes[0])(v) for v in got["prediction"]]
    np.testing.assert_allclose(_probas(got, m), _probas(plain, m), rtol=0, atol=1e-9, err_msg=where)
    _check(got, m, m.decision, plain["prediction"], where)
    m.decision = None


def test_sqlite_runs_the_exported_rule_for_every_kind(duck, models):
    from support.sqlite import sqlite_connection, sqlite_table
    db = sqlite_connection()
    for name, t in DATA.items():
        sqlite_table(db, name, t)
    for kind, name, m, kw in _export_cases(models):
        m.decision = DecisionRule.for_model(m, **kw)
        cur = db.execute(m.to_sql("sqlite", source=name))  # the source's columns unknown: passed with *
        got = _rows([c[0] for c in cur.description], cur.fetchall())
        assert "min_expected_cost" in got or "max_proba" in got  # helper columns stay with *
        _check_exported(duck, m, name, kw, got, f"sqlite {kind} {name}")


@pytest.mark.postgres
def test_postgres_runs_the_exported_rule_for_every_kind(duck, models):
    from support.engines import postgres_engine
    with postgres_engine(DATA) as pg:
        for kind, name, m, kw in _export_cases(models):
            m.decision = DecisionRule.for_model(m, **kw)
            with pg.con.cursor() as cur:
                cur.execute(m.to_sql("postgres", source=name))
                got = _rows([c.name for c in cur.description], cur.fetchall())
            _check_exported(duck, m, name, kw, got, f"postgres {kind} {name}")
        m = models["logistic", "two"]  # and Model.score on the engine
        m.decision = DecisionRule.for_model(m, threshold=("yes", 0.3), reject=0.1)
        got = m.score("two", con=pg, keep=["id"], key="id").to_pydict()
        _check_exported(duck, m, "two", dict(threshold=("yes", 0.3), reject=0.1), got, "postgres score")
        rule = m.decision = DecisionRule.for_model(m, threshold=("yes", 0.3), reject=0.1)  # evaluate there
        there, here = evaluate(m, "two", pg).decision, evaluate(m, "two", duck).decision
        m.save(pg, "decided")  # and the rule stored in PostgreSQL's catalog
        m.decision = None
        assert sqlnb.load(pg, "decided").decision == rule
        assert there.rejected_rows == here.rejected_rows > 0 and there.accepted_rows == here.accepted_rows
        assert there.expected_cost == pytest.approx(here.expected_cost, abs=1e-15)


@pytest.mark.spark
def test_spark_runs_the_exported_rule_for_every_kind(duck, models):
    from support.engines import spark_engine
    with spark_engine(DATA) as spark:
        for kind, name, m, kw in _export_cases(models):
            m.decision = DecisionRule.for_model(m, **kw)
            df = spark.spark.sql(m.to_sql("spark", source=name))
            got = _rows(df.columns, [tuple(r) for r in df.collect()])
            _check_exported(duck, m, name, kw, got, f"spark {kind} {name}")
        m = models["naive_bayes", "three"]  # Model.score on the engine: Spark's shape of the SELECT
        kw = _rules3(list(m.classes))[1]
        m.decision = DecisionRule.for_model(m, **kw)
        got = pa.Table.from_pylist([r.asDict() for r in m.score("three", con=spark, keep=["id"]).collect()])
        _check_exported(duck, m, "three", kw, got.to_pydict(), "spark score")


# -- evaluate ---------------------------------------------------------------------------------------------
def test_evaluate_reports_rejection_and_expected_cost_under_the_rule(duck, models):
    m = models["naive_bayes", "three"]
    rule = m.decision = DecisionRule.for_model(m, **_rules3(list(m.classes))[1])  # costs and a reject option
    try:
        got = m.score("three", duck).to_arrow_table().to_pydict()
        ev = evaluate(m, "three", duck)
    finally:
        m.decision = None
    classes, L = list(m.classes), rule.loss()
    y, pred, rej = got["y"], got["prediction"], got["rejected"]
    accepted = [i for i in range(N) if pred[i] is not None]
    d = ev.decision
    assert d.rejected_rows == sum(bool(r) for r in rej if r is not None) > 0
    assert d.accepted_rows == len(accepted) and d.decided_rows == d.accepted_rows + d.rejected_rows
    assert d.rejection_rate == d.rejected_rows / d.decided_rows
    assert d.accepted_accuracy == pytest.approx(np.mean([pred[i] == y[i] for i in accepted]), abs=1e-15)
    cost = np.mean([L[classes.index(y[i]), classes.index(pred[i])] for i in accepted])
    assert d.expected_cost == pytest.approx(cost, rel=1e-12)
    assert ev.accuracy == pytest.approx(sum(pred[i] == y[i] for i in range(N)) / N, abs=1e-15)
    text = text_report(ev)
    assert "rejected    " in text and f"{cost:.4f}" in text and "decision    " in text
    assert json.loads(json.dumps(ev.to_dict(), default=str))["decision"]["rejected_rows"] == d.rejected_rows
    plain = evaluate(m, "three", duck)
    assert plain.decision is None and "decision" not in text_report(plain)


# -- the command line -------------------------------------------------------------------------------------
def _fit(tmp_path, table=None) -> tuple[str, str]:
    data = write_parquet(table if table is not None else DATA["two"], tmp_path / "data.parquet")
    model = f"{tmp_path / 'models.duckdb'}:m"
    r = invoke("fit", data, "--label", "y", "--model", model, "--exclude", "id")
    assert r.exit_code == 0, r.stderr
    return data, model


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_decide_then_score_in_separate_processes(tmp_path):
    data, model = _fit(tmp_path)
    (tmp_path / "costs.csv").write_text("actual,predicted,cost\nyes,no,5\n")
    r = run_process("decide", "--model", model, "--costs", tmp_path / "costs.csv", "--reject", "0.6")
    assert r.returncode == 0, r.stderr
    r = run_process("score", data, "--model", model, "--keep", "id", "--out", tmp_path / "scored.parquet")
    assert r.returncode == 0, r.stderr
    got = pq.read_table(tmp_path / "scored.parquet").to_pydict()
    assert got["id"] == list(range(N))
    db, name = model.rsplit(":", 1)
    m = sqlnb.load(db, name)
    assert m.decision == DecisionRule.for_model(m, costs={("yes", "no"): 5}, reject=0.6)
    m.decision = None
    plain = m.score(data).to_arrow_table().to_pydict()
    _check(got, m, DecisionRule.for_model(m, costs={("yes", "no"): 5}, reject=0.6), plain["prediction"], "cli")

    shown = json.loads(invoke("show", "--model", model, "--format", "json").stdout)["decision"]
    assert shown["costs"] == [[0.0, 1.0], [5.0, 0.0]] and shown["reject"] == 0.6
    assert "decision     minimum expected cost (actual->predicted: yes->no 5" in invoke("show", "--model", model).stdout

    # one call with another rule; the stored one is left as it was
    r = invoke("score", data, "--model", model, "--threshold", "yes=0.9", "--no-proba", "--keep", "", "--out", "-")
    assert r.exit_code == 0 and r.stdout.splitlines()[0] == "prediction,expected_cost"
    assert sqlnb.load(db, name).decision.reject == 0.6
    ev = json.loads(invoke("evaluate", data, "--model", model, "--format", "json").stdout)
    assert ev["decision"]["rule"]["reject"] == 0.6 and ev["decision"]["rejected_rows"] == sum(
        bool(v) for v in got["rejected"] if v is not None)

    # sqlnb sql: the stored rule in the exported SELECT, another for one call
    assert '"min_expected_cost"' in invoke("sql", "--model", model, "--dialect", "postgres").stdout
    assert '"max_proba"' in invoke("sql", "--model", model, "--reject", "0.1").stdout

    r = invoke("decide", "--model", model, "--clear")
    assert r.exit_code == 0 and sqlnb.load(db, name).decision is None
    assert "decision" not in invoke("show", "--model", model).stdout


@pytest.mark.parametrize("text, fragments", [
    ("actual,predicted\nyes,no\n", ["header", "actual,predicted,cost"]),
    ("actual,predicted,cost\nmaybe,no,5\n", ["line 2", "'maybe' is not a class"]),
    ("actual,predicted,cost\nyes,no,five\n", ["line 2", "must be a number", "'five'"]),
    ("actual,predicted,cost\nyes,no,-5\n", ["line 2", ">= 0"]),
    ("actual,predicted,cost\nyes,no,nan\n", ["line 2", "finite"]),
    ("actual,predicted,cost\nyes,no\n", ["line 2", "3 fields"]),
    ("actual,predicted,cost\nyes,no,5\n\nyes,no,4\n", ["line 4", "twice"]),
    ("", ["header"]),
])
def test_a_hostile_costs_file_is_one_error_and_leaves_the_model(tmp_path, text, fragments):
    data, model = _fit(tmp_path)
    path = tmp_path / "costs.csv"
    path.write_text(text)
    before = snapshot(tmp_path / "models.duckdb")
    assert_error(invoke("decide", "--model", model, "--costs", path), *fragments)
    assert snapshot(tmp_path / "models.duckdb") == before
    assert_error(invoke("score", data, "--model", model, "--costs", path, "--out", "-"), *fragments)


def test_decide_option_errors(tmp_path):
    data, model = _fit(tmp_path)
    before = snapshot(tmp_path / "models.duckdb")
    assert_error(invoke("decide", "--model", model), "--clear")
    assert_error(invoke("decide", "--model", model, "--clear", "--reject", "0.1"), "--clear")
    assert_error(invoke("decide", "--model", model, "--costs", tmp_path / "none.csv"), "cannot read", "none.csv")
    assert_error(invoke("decide", "--model", model, "--threshold", "yes=2"), "between 0 and 1")
    assert_error(invoke("decide", "--model", model, "--threshold", "yes"), "CLASS=P")
    assert_error(invoke("sql", "--model", model, "--fit", "--reject", "0.1"), "--fit")
    assert snapshot(tmp_path / "models.duckdb") == before
    assert "Example" in invoke("decide", "--help").stdout


# -- adult against numpy ----------------------------------------------------------------------------------
@pytest.mark.shared_data
def test_adult_expected_cost_and_reject_equal_numpy(tmp_path):
    """A 1:5 cost matrix (predicting <=50K for an actual >50K costs 5): every prediction is
    numpy's argmin of Σ p·L over score's probabilities; --reject R rejects exactly the rows
    whose max probability is below 1 − R."""
    from support.shared_data import adult_test_query, adult_train_query, render, require_shared_data
    require_shared_data("adult_train", "adult_test")
    db = str(tmp_path / "adult.duckdb")
    with duckdb.connect(db) as con:
        for name, query in (("adult_train", adult_train_query()), ("adult_test", adult_test_query())):
            con.execute(render(exp.Create(this=sql.table(name), kind="TABLE", expression=query)))
    model = f"{tmp_path / 'models.duckdb'}:adult"
    assert invoke("fit", f"{db}:adult_train", "--label", "income", "--model", model).exit_code == 0
    (tmp_path / "costs.csv").write_text("actual,predicted,cost\n>50K,<=50K,5\n")
    assert invoke("decide", "--model", model, "--costs", tmp_path / "costs.csv").exit_code == 0

    scored = tmp_path / "scored.parquet"
    assert invoke("score", f"{db}:adult_test", "--model", model, "--out", scored).exit_code == 0
    got = pq.read_table(scored).to_pydict()
    assert len(got["prediction"]) == 16281
    P = np.array([got["proba_<=50K"], got["proba_>50K"]], float).T
    L = np.array([[0.0, 1.0], [5.0, 0.0]])  # rows: actual <=50K, >50K; columns: predicted
    R = P @ L
    want = np.where(np.argmin(R, axis=1) == 0, "<=50K", ">50K")
    assert got["prediction"] == want.tolist()
    np.testing.assert_array_equal(np.array(got["expected_cost"]), R.min(axis=1))
    base = (P[:, 1] > P[:, 0]).sum()
    assert (want == ">50K").sum() > 1.2 * base  # the costs move many rows to >50K (2,595 -> 3,709)

    ev = json.loads(invoke("evaluate", f"{db}:adult_test", "--model", model, "--format", "json").stdout)
    y = np.array([0 if v == "<=50K" else 1 for v in got["income"]])
    assert ev["decision"]["expected_cost"] == pytest.approx(L[y, np.argmin(R, axis=1)].mean(), rel=1e-12)
    assert ev["decision"]["rejected_rows"] == 0

    r = invoke("score", f"{db}:adult_test", "--model", model, "--reject", "0.1", "--out", scored, "--replace")
    assert r.exit_code == 0, r.stderr
    got = pq.read_table(scored).to_pydict()
    P = np.array([got["proba_<=50K"], got["proba_>50K"]], float).T
    rejected = P.max(axis=1) < 1 - 0.1
    assert got["rejected"] == rejected.tolist() and 0 < rejected.sum() < len(rejected)
    assert [p is None for p in got["prediction"]] == rejected.tolist()
    ev = json.loads(invoke("evaluate", f"{db}:adult_test", "--model", model, "--reject", "0.1",
                           "--format", "json").stdout)["decision"]
    assert ev["rejected_rows"] == rejected.sum() and ev["decided_rows"] == 16281
    correct = np.array(got["prediction"], dtype=object) == np.array(got["income"], dtype=object)
    assert ev["accepted_accuracy"] == pytest.approx(correct[~rejected].mean(), abs=1e-15)


def test_token_bags_and_the_long_layout_decide_too():
    """A text column (token bag) and a model of long token rows (``score_long``)."""
    rng = np.random.default_rng(3)
    words = np.array(["alpha", "beta", "gamma", "delta"])
    y = np.array(["ham", "spam"])[rng.integers(0, 2, 60)]
    docs = [" ".join(rng.choice(words[:3] if c == "ham" else words[1:], 4)) for c in y]
    con = duckdb.connect()
    con.register("corpus", pa.table({"id": np.arange(60), "text": docs, "y": y}))
    con.execute("CREATE TABLE long AS SELECT id, unnest(string_split(text, ' ')) AS token FROM corpus")
    bag = sqlnb.fit("corpus", "y", con=con, features=["text"], feature_kinds={"text": "multinomial"})
    long = sqlnb.fit_long("long", "corpus", id="id", token="token", label="y", kind="multinomial", con=con)
    for m, score in ((bag, lambda: m.score("corpus", con, keep=["id"])),
                     (long, lambda: m.score_long("long", con.sql("SELECT id FROM corpus"), con=con, keep=["id"]))):
        rule = m.decision = DecisionRule.for_model(m, threshold=("spam", 0.8), reject=0.1)
        got = score().to_arrow_table().to_pydict()
        assert got["id"] == list(range(60))
        _check(got, m, rule, [None] * 60, m.kind)
        assert 0 < sum(got["rejected"]) < 60 and got["prediction"].count("spam") < int((y == "spam").sum())


def test_least_renders_plainly_and_leaves_the_callers_tree():
    from sqlnb.models.decision import _least
    t = exp.select(_least([sql.col("a"), sql.col("b")]))
    before = t.copy()
    assert sql.render(t, "sqlite") == 'SELECT MIN("a", "b")'
    assert sql.render(t, "duckdb") == 'SELECT LEAST("a", "b")'
    assert t == before and t.expressions[0].args["ignore_nulls"] is True


def test_an_update_keeps_the_rule_while_the_classes_stay(duck):
    from sqlnb.workflows.generative.updating import update
    m = sqlnb.fit("three", "y", con=duck, exclude=["id"])
    m.decision = DecisionRule.for_model(m, costs={("a", "c"): 4.0}, reject=0.3)
    assert update(m, "three", con=duck).decision == m.decision
    duck.register("four", mixed_table(40, seed=9, classes=("a", "b", "c", "d")))
    # A new class: the costs given stay, the new class's pairs get the default 0/1 costs,
    # and the update says so (it used to drop the rule silently).
    from sqlnb.errors import UpdateWarning
    with pytest.warns(UpdateWarning, match=r"added class 'd'.*sqlnb decide --costs"):
        rule = update(m, "four", con=duck).decision
    assert rule.classes == ("a", "b", "c", "d") and rule.reject == 0.3
    want = 1.0 - np.eye(4)
    want[0, 2] = 4.0
    assert np.array_equal(rule.loss(), want)


def test_a_rule_leaves_the_calibration_figures_alone():
    """The ECE and the reliability table measure the probabilities: the same under a
    reject option or a cost matrix as under the argmax."""
    import duckdb
    from sqlnb.models.decision import DecisionRule
    from sqlnb.workflows.evaluate import evaluate
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 3)::VARCHAR AS y, (i % 3) + sin(i) * 1.5 AS a, cos(i * 7) AS b "
                "FROM range(400) r(i)")
    m = sqlnb.fit("t", label="y", con=con)
    plain = evaluate(m, "t", con)
    for rule in (DecisionRule.for_model(m, reject=0.2),
                 DecisionRule(tuple(m.classes), costs=((0.0, 5.0, 5.0), (1.0, 0.0, 1.0), (1.0, 1.0, 0.0)))):
        m.decision = rule
        ruled = evaluate(m, "t", con)
        assert ruled.accuracy != plain.accuracy  # the rule did change the predictions
        assert ruled.ece == pytest.approx(plain.ece, abs=1e-12)
        assert [b["rows"] for b in ruled.reliability] == [b["rows"] for b in plain.reliability]
        for got, want in zip(ruled.reliability, plain.reliability):
            assert got["accuracy"] == pytest.approx(want["accuracy"], abs=1e-12, nan_ok=True) or \
                got["accuracy"] is want["accuracy"] is None
