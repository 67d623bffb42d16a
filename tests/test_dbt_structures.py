"""``sqlnb dbt --train`` of binned columns and tree-augmented naive Bayes: the cut points
and the tree are the generating model's, written into the package; the per-bin counts and
the pair counts are retrained by incremental dbt models, the conditional tables derived
in SQL, and ``score_NAME_trained`` and ``sqlnb dbt-import`` give the probabilities of
the fit on the same rows with those cut points (:func:`_refit`: sqlnb's own statistics
scan of every row under the generated features, its tree derived from its pair counts,
which the test data keep equal to the generated tree, asserted).

The rows hold NULLs in every kind of column, and the scored rows values no batch had (a
region, numbers past every cut point). The SQL-only tests run the package's SELECTs in
DuckDB as dbt would; the slow one runs ``dbt build`` on dbt-duckdb (the first batch, a
second through the incremental models, ``--full-refresh``) in one module-scoped project.
"""

from __future__ import annotations

import json

import duckdb
import pytest

import sqlnb
from sqlnb.models.naive_bayes.fit import collect_statistics
from sqlnb.source import resolve
from sqlnb.workflows import dbt_params, dbt_structures, dbt_train
from support.cli import invoke
from support.dbt import dbt_executable as _dbt, results as _results, run as _run
from test_dbt_train import CLASSES, _batch, _close, _probabilities, _rendered, _table, _train_in_duckdb

FITS = {
    "cuts": dict(exclude=["id", "loaded_at", "views", "clicks"], bins="mdl", alpha=0.7,
                 feature_kinds={"age": "binned", "has_app": "bernoulli", "tier": "categorical"}),
    "tree": dict(exclude=["id", "loaded_at", "views", "clicks"], structure="tan", alpha=0.7,
                 bins={"age": "quantile:4", "income": "mdl"}, binarize={"score": 0.5},
                 feature_kinds={"has_app": "bernoulli", "tier": "categorical", "score": "bernoulli"}),
}
UNION = "SELECT * FROM b1 UNION ALL SELECT * FROM b2"


def _refit(model, con, query: str):
    """The fit on ``query``'s rows with ``model``'s features (cut points included): sqlnb's
    statistics scan, pair counts too for a tree model."""
    pairs = list(model.stats.pairs.features) if model.stats.pairs is not None else False
    return model.rebuilt(stats=collect_statistics(con, resolve(query, con), model.label, model.features, pairs=pairs))


def _batches(con) -> None:
    _table(con, "b1", _batch(con, 240, 1, 0, 1))
    _table(con, "b2", _batch(con, 160, 2, 1000, 2))
    _table(con, "customers", _batch(con, 120, 3, 5000, 9))


@pytest.mark.parametrize("name", list(FITS))
def test_binned_and_tree_tables_score_as_the_fit_with_the_generated_cuts_and_tree(name):
    """Two batches through the training SQL, the parameters and conditional tables derived
    in SQL, the trained macro's SELECT: the fit's probabilities on both batches within 1e-9;
    the model dbt-import reads (its tree derived from the stored pair counts) scores alike."""
    con = duckdb.connect()
    _batches(con)
    model = sqlnb.fit("b1", "segment", con=con, **FITS[name])
    assert any(f.kind == "binned" and f.edges for f in model.features)
    _train_in_duckdb(con, model, ["b1", "b2"])
    refit = _refit(model, con, UNION)
    assert refit.tree() == model.tree() and (name != "tree" or len(model.tree()) >= 4), model.tree()
    want = _probabilities(refit.score("customers", con, keep=["id"]).fetchall())
    select = _rendered(dbt_params.scoring_sql(model, "m", "duckdb"), relation='"customers"')
    got = _probabilities([(r[0], *r[1:1 + len(CLASSES)], r[-1]) for r in con.sql(select).fetchall()])
    _close(got, want, f"score_m_trained of {name}")
    imported = dbt_train.import_model(model, con, "m")
    assert imported.tree() == model.tree()
    _close(_probabilities(imported.score("customers", con, keep=["id"]).fetchall()), want, f"dbt-import of {name}")
    con.close()


def test_a_tree_parent_value_without_rows_falls_back_to_the_naive_term():
    """MLE (no pseudo-count): a (class, parent value) no row of the class has is 0/0 in the
    conditional table, NULL there, and its term is the child's naive one, as tan.py's."""
    con = duckdb.connect()
    _batches(con)
    fits = {**FITS["tree"], "estimator": "mle"}
    model = sqlnb.fit("b1", "segment", con=con, **fits)
    _train_in_duckdb(con, model, ["b1"])
    empty = sum(con.sql(f'SELECT count(*) FROM "{t}" WHERE c0 IS NULL OR c1 IS NULL OR c2 IS NULL').fetchall()[0][0]
                for t, _ in dbt_structures.tables(model, "m"))
    assert empty > 0
    want = _probabilities(model.score("customers", con, keep=["id"]).fetchall())
    select = _rendered(dbt_params.scoring_sql(model, "m", "duckdb"), relation='"customers"')
    _close(_probabilities([(r[0], *r[1:1 + len(CLASSES)], r[-1]) for r in con.sql(select).fetchall()]), want,
           "MLE tree")
    con.close()


# -- dbt build on dbt-duckdb ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A warehouse with the batches, ``tree`` and ``cuts`` fitted on the first and stored,
    the project ``--project --train --loaded-at`` of ``tree`` with ``cuts``'s package, and a
    model per package scoring ``customers`` with the trained macro."""
    dbt = _dbt()
    tmp = tmp_path_factory.mktemp("dbt_structures")
    wh = tmp / "wh.duckdb"
    con = duckdb.connect(str(wh))
    _batches(con)
    _table(con, "train", "SELECT * FROM b1")
    for name in FITS:
        sqlnb.fit("b1", "segment", con=con, **FITS[name]).save(con, name)
    con.close()
    out = tmp / "project"
    made = invoke("dbt", "--model", f"{wh}:tree", "--out", out, "--project", "--table", "customers", "--train",
                  "--loaded-at", "loaded_at")
    assert made.exit_code == 0, made.stderr
    made = invoke("dbt", "--model", f"{wh}:cuts", "--out", out / "dbt_packages" / "sqlnb_cuts", "--train",
                  "--loaded-at", "loaded_at")
    assert made.exit_code == 0, made.stderr
    for name in FITS:
        (out / "models" / f"{name}_trained.sql").write_text(
            "{{ config(materialized='table') }}\n"
            f"{{{{ sqlnb_{name}.score_{name}_trained(source('sqlnb_tree', 'input'), columns=['id']) }}}}\n")
    return dbt, wh, out


VARS = json.dumps({"sqlnb_tree_train_table": "train", "sqlnb_cuts_train_table": "train"})


def _check(wh, query: str, what: str) -> None:
    for name in FITS:
        done = invoke("dbt-import", "--model", f"{wh}:{name}", "--as", f"{name}_dbt", "--replace")
        assert done.exit_code == 0, done.stderr
        con = duckdb.connect(str(wh))
        model = sqlnb.load(con, name)
        refit = _refit(model, con, query)
        assert refit.tree() == model.tree(), what
        want = _probabilities(refit.score("customers", con, keep=["id"]).fetchall())
        got = _probabilities(con.sql(f"SELECT id, {', '.join('proba_' + c for c in CLASSES)}, prediction "
                                     f"FROM {name}_trained").fetchall())
        _close(got, want, f"{what}: score_{name}_trained")
        imported = sqlnb.load(con, f"{name}_dbt")
        assert imported.tree() == model.tree(), what
        _close(_probabilities(imported.score("customers", con, keep=["id"]).fetchall()), want,
               f"{what}: sqlnb dbt-import of {name}")
        con.close()


@pytest.mark.slow
def test_dbt_trains_binned_columns_and_the_tree_incrementally_on_duckdb(project):
    """(a) the first batch; (b) the second through the incremental models; (c) a full
    refresh: each equals the fit on the same rows with the generated cut points and tree."""
    dbt, wh, out = project

    def build(*extra):
        _run([dbt, "build", "--profiles-dir", ".", "--vars", VARS, *extra], out, f"dbt build {extra}")
        assert set(_results(out).values()) == {"success", "pass"}

    build()
    assert "tree_pairs" in _results(out) and "tree_tree_1" in _results(out)
    _check(wh, "SELECT * FROM b1", "first batch")
    con = duckdb.connect(str(wh))
    con.execute("INSERT INTO train SELECT * FROM b2")
    con.close()
    build()
    _check(wh, UNION, "incremental")
    build("--full-refresh")
    _check(wh, UNION, "full refresh")
