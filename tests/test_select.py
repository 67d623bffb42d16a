"""Wrapper feature selection (``sqlnb select``): every step's CV figures are those of
cross-validating that subset; the path is the greedy search an oracle computes by brute
force with scikit-learn; the saved model is a fit on the chosen columns."""

from __future__ import annotations

import itertools
import json

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import log_loss
from sklearn.naive_bayes import GaussianNB
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.errors import SqlnbError
from sqlnb.source import read_with
from sqlnb.workflows import cv
from sqlnb.workflows.select import search, select_features
from support.cli import assert_error, invoke, run_process, snapshot
from support.statements import counting_view


def mixed(seed: int = 0, n: int = 300) -> pa.Table:
    """Gaussian columns (one with NULLs, one pure noise, one a copy of another), a
    categorical column with NULLs, a boolean one, three classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.normal(0.9 * y, 1.0)
    w = rng.normal(-0.5 * y, 1.5)
    w_null = rng.random(n) < 0.1
    colour = np.array(["red", "green", "blue"], dtype=object)[(y + rng.integers(0, 2, n)) % 3]
    colour = [None if rng.random() < 0.05 else c for c in colour]
    return pa.table({"x": x, "w": pa.array(w, mask=w_null), "noise": rng.normal(0, 1, n), "twin": x.copy(),
                     "colour": pa.array(colour, pa.string()), "flag": rng.random(n) < 0.3 + 0.2 * (y == 1),
                     "y": np.array(["a", "b", "c"], dtype=object)[y]})


def duplicated(seed: int, n: int = 3000) -> pa.Table:
    """Two classes; ``signal`` and its exact copy ``copy``, an informative ``colour``,
    and the pure noise ``noise`` and ``hue``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(1.2 * y, 1.0)
    colour = np.array(["red", "green", "blue"], dtype=object)[(y + (rng.random(n) < 0.35)) % 3]
    return pa.table({"signal": x, "copy": x.copy(), "noise": rng.normal(0, 1, n), "colour": colour,
                     "hue": np.array(["p", "q", "r"], dtype=object)[rng.integers(0, 3, n)],
                     "y": np.array(["no", "yes"], dtype=object)[y]})


def folds_of(con, name: str, folds: int, seed: int) -> np.ndarray:
    """Each row's fold, as cross-validation assigns it, in row order."""
    table = con.table(name).to_arrow_table()  # in row order; the folds come out in the window's
    con.register("folds_in", table.append_column("__i", pa.array(np.arange(table.num_rows))))
    source = as_engine(con).resolve(read_with("folds_in"))
    # key: the table's own columns, hashed as cross_validate hashes them (every column).
    source, fold = cv.assign_folds(source, "y", folds, seed, key=table.column_names)
    query = exp.select(fold).from_(source.from_("src")).order_by(sql.col("__i", "src"))
    return np.array([r[0] for r in con.execute(sql.render(query)).fetchall()])


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_every_step_equals_cross_validating_its_subset(direction):
    con = duckdb.connect()
    con.register("t", mixed())
    s = select_features("t", "y", con=con, direction=direction, folds=4, seed=3, until_all=True, alpha=0.5)
    assert len(s.path) == 7 and s.scans == {"source": 1, "statistics": 1, "scoring": 6}
    assert [p["size"] for p in s.path] == (list(range(7)) if direction == "forward" else list(range(6, -1, -1)))
    y = np.array(mixed()["y"].to_pylist())
    fold = folds_of(con, "t", 4, 3)
    for p in s.path:
        if p["subset"]:
            r = sqlnb.cross_validate("t", "y", con=con, folds=4, seed=3, features=p["subset"], alpha=0.5).results[0]
            assert p["fold_error"] == pytest.approx([1 - a for a in r["accuracy"]], abs=1e-12)
            np.testing.assert_allclose(p["fold_log_loss"], r["log_loss"], rtol=0, atol=1e-9)
            np.testing.assert_allclose([p["error"], p["log_loss"]], [1 - r["mean_accuracy"], r["mean_log_loss"]],
                                       rtol=0, atol=1e-9)
        else:  # the class prior alone: the training folds' majority class, their class shares
            errors, losses = [], []
            for i in range(4):
                classes, counts = np.unique(y[fold != i], return_counts=True)
                prior = counts / counts.sum()
                errors.append(np.mean(y[fold == i] != classes[np.argmax(counts)]))
                losses.append(log_loss(y[fold == i], np.tile(prior, (np.sum(fold == i), 1)), labels=classes))
            np.testing.assert_allclose(p["fold_error"], errors, rtol=0, atol=1e-12)
            np.testing.assert_allclose(p["fold_log_loss"], losses, rtol=0, atol=1e-9)
    assert s.path[s.chosen] == min(s.path, key=lambda p: (p["error"], p["log_loss"], p["size"]))


def test_the_source_is_read_once():
    """Every step reads the copy, not the source: a side-effecting UDF counts the rows read."""
    con = duckdb.connect()
    seen = counting_view(con, mixed(5, 250), ["x", "w", "noise", "colour", "flag", "y"], "x")
    s = select_features("data", "y", con=con, folds=3, until_all=True)
    # five features: the first read scores the prior alone and 5 candidates, then 4, 3, 2, 1
    assert seen["rows"] == 250 and s.scans == {"source": 1, "statistics": 1, "scoring": 5} and s.evaluated == 16


def oracle_figures(X: np.ndarray, y: np.ndarray, fold: np.ndarray, folds: int, var_smoothing: float) -> dict:
    """CV error and log loss of every subset of X's columns, by scikit-learn's GaussianNB
    (its variance floor is a fraction of the largest variance among the subset's columns)."""
    classes = np.unique(y)
    out = {}
    for size in range(X.shape[1] + 1):
        for subset in itertools.combinations(range(X.shape[1]), size):
            acc, ll = [], []
            for i in range(folds):
                train, test = fold != i, fold == i
                if subset:
                    nb = GaussianNB(var_smoothing=var_smoothing).fit(X[train][:, subset], y[train])
                    proba = nb.predict_proba(X[test][:, subset])
                else:
                    counts = np.array([np.sum(y[train] == c) for c in classes])
                    proba = np.tile(counts / counts.sum(), (test.sum(), 1))
                acc.append(np.mean(classes[np.argmax(proba, axis=1)] == y[test]))
                ll.append(log_loss(y[test], proba, labels=classes))
            out[subset] = {"error": 1 - float(np.mean(acc)), "log_loss": float(np.mean(ll))}
    return out


@pytest.mark.parametrize("direction,until_all", [("forward", False), ("backward", False), ("forward", True),
                                                 ("backward", True)])
def test_the_path_is_the_greedy_search_over_a_brute_force_oracle(direction, until_all):
    rng = np.random.default_rng(11)
    n = 180
    y = rng.integers(0, 3, n)
    # Spreads from 0.5 to 40: with var_smoothing 0.05 the variance floor of a subset
    # depends on which columns it holds, as in a fit on those columns alone.
    X = np.column_stack([rng.normal(0.7 * y, 1.0), rng.normal(0, 40.0, n) + 8.0 * (y == 2),
                         rng.normal(0.3 * y, 0.5), rng.normal(0, 3.0, n), rng.normal(-0.4 * y, 2.0)])
    t = pa.table({**{f"x{j}": X[:, j] for j in range(5)}, "y": [f"k{v}" for v in y]})
    con = duckdb.connect()
    con.register("t", t)
    s = select_features("t", "y", con=con, direction=direction, folds=3, seed=5, until_all=until_all,
                        var_smoothing=0.05)
    oracle = oracle_figures(X, np.array(t["y"].to_pylist()), folds_of(con, "t", 3, 5), 3, 0.05)
    names = [f"x{j}" for j in range(5)]
    path, chosen, _ = search(lambda subsets: [oracle[tuple(names.index(c) for c in sub)] for sub in subsets],
                             names, direction, until_all)
    assert [(p["change"], p["subset"]) for p in s.path] == [(p["change"], p["subset"]) for p in path]
    assert s.chosen == chosen and len(s.path) > 2
    for got, want in zip(s.path, path):
        np.testing.assert_allclose([got["error"], got["log_loss"]], [want["error"], want["log_loss"]],
                                   rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_duplicated_column_is_chosen_once(seed):
    con = duckdb.connect()
    con.register("t", duplicated(seed))
    for direction in ("forward", "backward"):
        # Whether a step improves the CV error depends on the folds: with the stratified
        # folds of fold seed 0, data seed 1's full set (error 0.1133) beats every removal,
        # so backward stops at once; fold seed 1 shows the duplicate removed (the hash
        # folds of f6098f3 did at seed 0).
        s = select_features("t", "y", con=con, direction=direction, folds=5, seed=1)
        assert "colour" in s.features and len({"signal", "copy"} & set(s.features)) == 1, (direction, s.features)


@pytest.mark.parametrize("inline_max", [1000, 100])
def test_large_vocabularies_in_place_or_by_the_pooled_query(monkeypatch, inline_max):
    """A categorical column of 150 values is looked up in place (no join) up to the
    select module's INLINE_MAX; past it the step is cross-validation's pooled query. The
    figures are the same either way."""
    from sqlnb.workflows import select as select_module

    pooled = []
    monkeypatch.setattr(select_module, "INLINE_MAX", inline_max)
    monkeypatch.setattr(cv, "pooled_summary_query", lambda *a, _f=cv.pooled_summary_query: pooled.append(1) or _f(*a))
    rng = np.random.default_rng(2)
    t = mixed(2, 400).append_column("many", pa.array([f"v{v}" for v in rng.integers(0, 150, 400)]))
    con = duckdb.connect()
    con.register("t", t)
    s = select_features("t", "y", con=con, folds=3, features=["x", "colour", "many"], until_all=True)
    assert s.scans["scoring"] == 3 and len(pooled) == (0 if inline_max == 1000 else 3)
    for p in s.path[1:]:
        r = sqlnb.cross_validate("t", "y", con=con, folds=3, features=p["subset"]).results[0]
        np.testing.assert_allclose([p["error"], p["log_loss"]], [1 - r["mean_accuracy"], r["mean_log_loss"]],
                                   rtol=0, atol=1e-9)


def test_the_chosen_model_is_a_fit_on_the_chosen_columns(tmp_path):
    data = str(tmp_path / "mixed.parquet")
    pq.write_table(mixed(4), data)
    db = tmp_path / "models.duckdb"
    out = invoke("select", data, "--label", "y", "--folds", "3", "--alpha", "2", "--feature-kind", "flag=categorical",
                 "--model", f"{db}:fss", "--format", "json")
    assert out.exit_code == 0, out.stderr
    report = json.loads(out.stdout)
    saved = sqlnb.load(str(db), "fss")
    assert saved.feature_names == report["features"] and report["features"]
    fitted = sqlnb.fit(data, "y", features=report["features"], alpha=2.0, feature_kinds={"flag": "categorical"})
    assert [(f.name, f.kind) for f in saved.features] == [(f.name, f.kind) for f in fitted.features]
    assert saved.hyper == fitted.hyper and saved.classes == fitted.classes
    np.testing.assert_array_equal(saved.stats.class_n, fitted.stats.class_n)
    for name, got in saved.stats.features.items():
        for field, value in vars(got).items():
            want = getattr(fitted.stats.features[name], field)
            if field == "values":
                assert value == want
            else:
                np.testing.assert_allclose(value, want, rtol=1e-12, atol=1e-9, err_msg=f"{name}.{field}")
    scored = [m.score(data, outputs=("jll", "prediction")).fetchnumpy() for m in (saved, fitted)]
    assert list(scored[0]["prediction"]) == list(scored[1]["prediction"])
    for c in saved.classes:
        np.testing.assert_allclose(scored[0][f"jll_{c}"], scored[1][f"jll_{c}"], rtol=0, atol=1e-9)
    assert saved.report["selection"]["cv_error"] == report["error"] and saved.report["seconds"] > 0
    shown = invoke("show", "--model", f"{db}:fss")
    assert shown.exit_code == 0 and " in ? s " not in shown.stdout and "trained on   300 rows" in shown.stdout


def test_cli_in_a_separate_process(tmp_path):
    data = str(tmp_path / "dup.parquet")
    pq.write_table(duplicated(0, 600), data)
    db = tmp_path / "m.duckdb"
    done = run_process("select", data, "--label", "y", "--direction", "backward", "--folds", "4",
                       "--model", f"{db}:back", module=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("backward selection, 4-fold cross-validation (seed 0)")
    assert lines[2].split() == ["step", "change", "features", "CV", "error", "CV", "log", "loss"]
    assert lines[3].split()[:3] == ["0", "(all)", "5"]
    s = select_features(data, "y", direction="backward", folds=4)
    assert lines[-1] == f"chosen: step {s.path[s.chosen]['step']}, {len(s.features)} features: {', '.join(s.features)}"
    assert sqlnb.load(str(db), "back").feature_names == s.features


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    data = str(tmp_path / "mixed.parquet")
    pq.write_table(mixed(0, 30), data)
    db = tmp_path / "m.duckdb"
    before = snapshot(db)
    for args, fragments in [
        (["--features", "x,nope"], ["'nope'"]),
        (["--folds", "1"], ["--folds must be at least 2, not 1"]),
        (["--folds", "40"], ["has no labelled rows; use fewer folds"]),
        (["--kind", "lda"], ["naive Bayes"]),
        (["--weight", "x"], ["row weights"]),
        (["--direction", "sideways"], ["sideways"]),
    ]:
        assert_error(invoke("select", data, "--label", "y", "--model", f"{db}:m", *args), *fragments)
    assert snapshot(db) == before
    with pytest.raises(SqlnbError, match="unknown direction 'upward'"):
        select_features(data, "y", direction="upward")
    with pytest.raises(SqlnbError, match="'nope' is not a feature of this model"):
        sqlnb.fit(data, "y").select(["x", "nope"])


def test_key_and_seed_give_the_folds_of_cv(tmp_path):
    """--key (an integer row id) and --seed: the folds of sqlnb cv, the same path as the library's."""
    data = str(tmp_path / "keyed.parquet")
    t = duplicated(1, 400)
    pq.write_table(t.append_column("id", pa.array(np.arange(400), pa.int64())), data)
    out = invoke("select", data, "--label", "y", "--exclude", "id", "--key", "id", "--seed", "9", "--folds", "3",
                 "--until-all", "--format", "json")
    assert out.exit_code == 0, out.stderr
    got = json.loads(out.stdout)
    s = select_features(data, "y", exclude=["id"], key=["id"], seed=9, folds=3, until_all=True)
    assert [(p["change"], p["error"]) for p in got["path"]] == [(p["change"], p["error"]) for p in s.path]
    assert got["seed"] == 9 and got["features"] == s.features and len(got["path"]) == 6
    r = sqlnb.cross_validate(data, "y", features=s.path[2]["subset"], key=["id"], seed=9, folds=3).results[0]
    np.testing.assert_allclose(s.path[2]["fold_log_loss"], r["log_loss"], rtol=0, atol=1e-9)


def test_token_bags_are_scored_fold_by_fold():
    """A token bag scores through a LATERAL join, which neither the term query nor the
    pooled one can key: each subset's folds are scored one by one, with the figures of cv."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 120)
    words = [["good", "fine", "ok"], ["bad", "poor", "ok"]]
    t = pa.table({"x": rng.normal(y, 1.0), "body": [" ".join(rng.choice(words[v], 4)) for v in y],
                  "y": [str(v) for v in y]})
    con = duckdb.connect()
    con.register("t", t)
    kinds = {"body": "multinomial"}
    s = select_features("t", "y", con=con, folds=3, feature_kinds=kinds, text={"stop_words": ["ok"]}, until_all=True)
    assert s.scans["scoring"] == 3 * 3 + 1 * 3  # prior and two candidates, then one, each fold by fold
    source = as_engine(con).resolve(read_with("t"))
    source, fold = cv.assign_folds(source, "y", 3, 0)
    for p in s.path[1:]:  # the stop words reach every fold model: refit each fold with them
        refits = [cv.evaluate_fold(con, sqlnb.fit(cv.fold_source(source, fold, i, held_out=False), "y", con=con,
                                                  features=p["subset"], feature_kinds=kinds if "body" in p["subset"]
                                                  else None, text={"stop_words": ["ok"]}),
                                   cv.fold_source(source, fold, i), "y") for i in range(3)]
        assert p["fold_error"] == pytest.approx([1 - f["accuracy"] for f in refits], abs=1e-12)
        np.testing.assert_allclose(p["fold_log_loss"], [f["log_loss"] for f in refits], rtol=0, atol=1e-9)
