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
import numpy as np
import pytest

import sqlnb
from sqlnb.models.naive_bayes import kdb
from sqlnb.models.naive_bayes.fit import collect_statistics
from sqlnb.source import resolve
from sqlnb.workflows import dbt_aode, dbt_params, dbt_structures, dbt_train
from support.cli import invoke
from support.dbt import (dbt_executable as _dbt, postgres_build, postgres_trained, results as _results, run as _run,
                          train_project)
from test_dbt_train import CLASSES, _batch, _close, _probabilities, _rendered, _table, _train_in_duckdb

#: The models dbt builds: binned naive Bayes, and TAN and KDB(2) over binned, categorical
#: and Bernoulli columns.
FITS = {
    "cuts": dict(exclude=["id", "loaded_at", "views", "clicks"], bins="mdl", alpha=0.7,
                 feature_kinds={"age": "binned", "has_app": "bernoulli", "tier": "categorical"}),
    "tree": dict(exclude=["id", "loaded_at", "views", "clicks"], structure="tan", alpha=0.7,
                 bins={"age": "quantile:4", "income": "mdl"}, binarize={"score": 0.5},
                 feature_kinds={"has_app": "bernoulli", "tier": "categorical", "score": "bernoulli"}),
}
FITS["kdb2"] = {**FITS["tree"], "structure": "kdb:2"}
FITS["aode"] = {**FITS["tree"], "structure": "aode"}
#: And KDB(1) (SQL-only tests).
STRUCTURED = {**FITS, "kdb1": {**FITS["tree"], "structure": "kdb:1"}}
UNION = "SELECT * FROM b1 UNION ALL SELECT * FROM b2"


def _refit(model, con, query: str):
    """The fit on ``query``'s rows with ``model``'s features (cut points included): sqlnb's
    statistics scan, pair counts too for a tree model."""
    pairs = list(model.stats.pairs.features) if model.stats.pairs is not None else False
    source = resolve(query, con)
    stats = collect_statistics(con, source, model.label, model.features, pairs=pairs)
    if model.hyper.structure == "kdb:2":  # and the joint counts its structure needs
        stats = kdb.with_joints(con, source, model.label, None, model.features, stats, 2)
    return model.rebuilt(stats=stats)


def _batches(con) -> None:
    _table(con, "b1", _batch(con, 240, 1, 0, 1))
    _table(con, "b2", _batch(con, 160, 2, 1000, 2))
    _table(con, "customers", _batch(con, 120, 3, 5000, 9))


@pytest.mark.parametrize("name", list(STRUCTURED))
def test_binned_and_tree_tables_score_as_the_fit_with_the_generated_cuts_and_tree(name):
    """Two batches through the training SQL, the parameters and conditional tables derived
    in SQL, the trained macro's SELECT: the fit's probabilities on both batches within 1e-9;
    the model dbt-import reads (its tree derived from the stored pair counts) scores alike."""
    con = duckdb.connect()
    _batches(con)
    model = sqlnb.fit("b1", "segment", con=con, **STRUCTURED[name])
    assert any(f.kind == "binned" and f.edges for f in model.features)
    _train_in_duckdb(con, model, ["b1", "b2"])
    refit = _refit(model, con, UNION)
    assert refit.tree() == model.tree() and (name in ("cuts", "aode") or len(model.tree()) >= 4), model.tree()
    assert name != "aode" or (len(dbt_aode.discrete(model)) >= 4
                              and con.sql("SELECT count(*) FROM m_aode").fetchall()[0][0] > 0)
    assert name != "kdb2" or dbt_structures.triples(model), model.tree()
    want = _probabilities(refit.score("customers", con, keep=["id"]).fetchall())
    select = _rendered(dbt_params.scoring_sql(model, "m", "duckdb"), relation='"customers"')
    got = _probabilities([(r[0], *r[1:1 + len(CLASSES)], r[-1]) for r in con.sql(select).fetchall()])
    _close(got, want, f"score_m_trained of {name}")
    imported = dbt_train.import_model(model, con, "m")
    assert imported.tree() == model.tree()
    _close(_probabilities(imported.score("customers", con, keep=["id"]).fetchall()), want, f"dbt-import of {name}")
    con.close()


@pytest.mark.parametrize("name", ["tree", "kdb2", "aode"])
def test_a_parent_value_without_rows_falls_back_to_the_naive_term(name):
    """MLE (no pseudo-count): a (class, parent values) no row of the class has is 0/0 in the
    conditional table, NULL there, and its term is the child's naive one, as tan.py's and
    kdb.py's; AODE's ratio is 0 there, −inf for a pair no row of the class has (a
    super-parent's product 0), as aode.py's."""
    con = duckdb.connect()
    _batches(con)
    fits = {**STRUCTURED[name], "estimator": "mle"}
    model = sqlnb.fit("b1", "segment", con=con, **fits)
    _train_in_duckdb(con, model, ["b1"])
    empty = sum(con.sql(f'SELECT count(*) FROM "{t}" WHERE c0 IS NULL OR c1 IS NULL OR c2 IS NULL').fetchall()[0][0]
                for t, _ in dbt_structures.tables(model, "m"))
    if name == "aode":
        empty = con.sql("SELECT count(*) FROM m_aode WHERE least(c0, c1, c2) = '-inf'::DOUBLE").fetchall()[0][0]
    assert empty > 0
    want = model.score("customers", con, keep=["id"]).fetchall()
    select = _rendered(dbt_params.scoring_sql(model, "m", "duckdb"), relation='"customers"')
    got = [(r[0], *r[1:1 + len(CLASSES)], r[-1]) for r in con.sql(select).fetchall()]
    # a row whose every class scores -inf (a zero MLE probability in each) has no probabilities in both
    assert sorted(r[0] for r in got if r[1] is None) == sorted(r[0] for r in want if r[1] is None)
    _close(_probabilities([r for r in got if r[1] is not None]), _probabilities([r for r in want if r[1] is not None]),
           f"MLE {name}")
    con.close()


def test_duckdb_counts_the_pairs_in_one_scan_per_twelve_pairs_as_the_per_pair_form():
    """DuckDB's pair counts are sqlnb's GROUPING SETS scan (8 tree features: 28 pairs in
    3 scans); PostgreSQL and Spark keep one GROUP BY per pair. Both forms, run in DuckDB
    over two batches with NULLs in every kind of column, count the same rows."""
    from sqlnb import sql

    con = duckdb.connect()
    _batches(con)
    fits = {**STRUCTURED["tree"], "bins": {"age": "quantile:4", "income": "mdl", "views": "quantile:3"},
            "exclude": ["id", "loaded_at"], "feature_kinds": {**STRUCTURED["tree"]["feature_kinds"],
                                                             "clicks": "categorical"}}
    model = sqlnb.fit("b1", "segment", con=con, **fits)
    feats = dbt_train._parts(model)["pairs"]
    assert len(feats) == 8, [f.name for f in feats]
    counted = {}
    for dialect in ("duckdb", "postgres", "spark"):
        tree = dbt_train._batch(model, "pairs", feats, None, dialect)
        text = sql.render(tree, "duckdb")
        assert text.count("GROUPING SETS") == (3 if dialect == "duckdb" else 0), dialect
        assert text.count("GROUP BY") == (3 if dialect == "duckdb" else 28), dialect
        counted[dialect] = sorted(con.sql(sql.render(tree.with_("new", as_=UNION), "duckdb")).fetchall(), key=str)
    assert counted["duckdb"] == counted["postgres"] == counted["spark"] and len(counted["duckdb"]) > 900
    con.close()


def test_union_all_chains_the_queries_as_they_are():
    """``sql.union_all``, which builds every UNION ALL of the package's SQL: the chain
    ``exp.union`` builds, rendered alike, holding the given queries themselves (not a copy
    of the growing chain per branch: an AODE package of ~50-bin columns took a minute)."""
    from sqlglot import exp

    from sqlnb import sql

    parts = [exp.select(exp.alias_(exp.Literal.number(i), "x", quoted=True)) for i in range(60)]
    chained = sql.union_all(parts)
    assert sql.render(chained) == sql.render(exp.union(*parts, distinct=False))
    node, seen = chained, []
    while isinstance(node, exp.Union):
        seen.append(node.expression)
        node = node.this
    assert [id(q) for q in [node, *reversed(seen)]] == [id(q) for q in parts]
    assert sql.union_all(parts[:1]) is parts[0]


@pytest.mark.parametrize("safe", [7.5, 5.0], ids=["shifted", "refused"])
def test_aode_shifts_its_log_sum_exp_as_the_fit_and_refuses_what_it_refuses(safe, monkeypatch):
    """AODE's shift, derived in SQL from the ratio table's bounds, is the fit's: with a
    limit of 7.5 nats (the data's T within about [−8.5, +3.7]) two classes are shifted by
    their midpoint and one is not, and the scores stay the fit's within 1e-9; at 5.0 the
    bounds span more than twice the limit: the fit refuses the model, the shift is NULL,
    so the scores are NULL (the package's probabilities test fails)."""
    from sqlnb.models.naive_bayes import aode

    con = duckdb.connect()
    _batches(con)
    model = sqlnb.fit("b1", "segment", con=con, **STRUCTURED["aode"])
    monkeypatch.setattr(aode, "EXP_SAFE", safe)
    _train_in_duckdb(con, model, ["b1"])
    shift = con.sql("SELECT * FROM m_aode_shift").fetchall()[0]
    select = _rendered(dbt_params.scoring_sql(model, "m", "duckdb"), relation='"customers"')
    got = [(r[0], *r[1:1 + len(CLASSES)], r[-1]) for r in con.sql(select).fetchall()]
    if safe == 5.0:
        with pytest.raises(sqlnb.SqlnbError, match="past the 10 its log-sum-exp holds"):
            model.rebuilt(stats=model.stats).log_parameters()
        assert shift == (None, None, None) and all(r[1] is None for r in got)
        return
    refit = model.rebuilt(stats=model.stats)
    want = refit.aode_summary()["shift"]
    assert sorted(v == 0.0 for v in want) == [False, False, True], want
    np.testing.assert_allclose(shift, want, rtol=0, atol=1e-12)
    _close(_probabilities(got), _probabilities(refit.score("customers", con, keep=["id"]).fetchall()), "shifted AODE")
    con.close()


def _moving(con) -> str:
    """A batch (600 rows) in which tier and score follow region: a fit on it with the first
    batch links them, so the generated tree and parents are no longer what the counts choose."""
    return (f"SELECT * REPLACE (CASE WHEN region IS NULL THEN NULL WHEN region < 'm' THEN 1 ELSE 2 END AS tier, "
            f"CASE WHEN region < 'm' THEN score + 1 ELSE score END AS score) FROM ({_batch(con, 600, 4, 2000, 3)})")


def _structure_failed(failed, status: dict, models: dict) -> None:
    """After a ``dbt build`` over a batch that moves the structure: the build failed, TAN's
    and KDB(2)'s structure tests failed, and their conditional tables (region's, whose
    parent moved) were left as they were. ``models``: name -> the generating model."""
    assert failed.returncode != 0
    for name in ("tree", "kdb2"):
        assert status[f"sqlnb_{name}_structure_{name}_pairs_"] == "fail", failed.stdout[-3000:]
        region = models[name].feature_names.index("region")
        assert status[f"{name}_tree_{region}"] == "skipped"  # the conditional tables stay as they were


@pytest.mark.parametrize("name", ["tree", "kdb1", "kdb2"])
def test_the_structure_test_fails_naming_the_feature_when_the_counts_choose_another_structure(name):
    """The package's test ``sqlnb_NAME_structure`` (its SQL run in DuckDB over the stored
    pair counts): no row after a second batch that keeps the structure; after one that
    moves region's parent (a fit on those rows chooses another tree), rows naming it."""
    con = duckdb.connect()
    _batches(con)
    _table(con, "b3", _moving(con))
    model = sqlnb.fit("b1", "segment", con=con, **STRUCTURED[name])
    test = _rendered(dbt_structures.structure_test_sql(model, "m", "duckdb"))
    _train_in_duckdb(con, model, ["b1", "b2"])
    assert con.sql(test).fetchall() == []
    for (t,) in con.sql("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'm_%'").fetchall():
        con.execute(f'DROP TABLE "{t}"')
    _train_in_duckdb(con, model, ["b1", "b3"])
    problems = [r[0] for r in con.sql(test).fetchall()]
    assert any(p.startswith("feature region: the pair (region, tier) now carries more information") for p in problems)
    assert all(p.endswith("fit again and generate the package again") for p in problems), problems
    if name != "kdb2":  # (kdb:2's refit needs joint counts the moved structure did not gather)
        assert _refit(model, con, "SELECT * FROM b1 UNION ALL SELECT * FROM b3").tree()["region"] != \
            model.tree()["region"]
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
    train_project(wh, out, "tree", {name: ["--loaded-at", "loaded_at"] for name in FITS if name != "tree"},
                  ["--loaded-at", "loaded_at"])
    return dbt, wh, out


VARS = json.dumps({f"sqlnb_{name}_train_table": "train" for name in FITS})
#: The second batch moves the cut points (tests/test_dbt_cuts.py tests that their test
#: fails): the builds over it leave the packages' cut-point tests out.
UNCUT = ["--exclude", *(f"test_name:sqlnb_{name}_cuts" for name in FITS)]


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
        assert imported.hyper.structure == model.hyper.structure and imported.aode_summary() == refit.aode_summary()
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
    assert {"tree_pairs", "tree_tree_1", "kdb2_triples", "aode_pairs", "aode_aode", "aode_aode_shift"} <= set(
        _results(out))
    # AODE has no structure to keep: no structure test; every package tests its cut points (passed)
    assert not [n for n in _results(out) if n.startswith("sqlnb_aode_structure")]
    assert {f"sqlnb_{name}_cuts_{name}_values_" for name in FITS} <= set(_results(out))
    _check(wh, "SELECT * FROM b1", "first batch")
    shown = invoke("show", "--model", f"{wh}:aode_dbt")
    assert shown.exit_code == 0 and "structure=aode" in shown.stdout and "dbt tables main.aode_*" in shown.stdout, \
        shown.stdout + shown.stderr
    con = duckdb.connect(str(wh))
    con.execute("INSERT INTO train SELECT * FROM b2")
    con.close()
    build(*UNCUT)
    _check(wh, UNION, "incremental")
    build("--full-refresh", *UNCUT)
    _check(wh, UNION, "full refresh")

    con = duckdb.connect(str(wh))  # a batch that moves the structure: its test fails, naming the feature
    con.execute(f"INSERT INTO train {_moving(con)}")
    con.close()
    failed = _run([dbt, "build", "--profiles-dir", ".", "--vars", VARS, "--store-failures"], out,
                  "dbt build over a batch that moves the structure", ok=False)
    con = duckdb.connect(str(wh), read_only=True)
    _structure_failed(failed, _results(out), {name: sqlnb.load(con, name) for name in ("tree", "kdb2")})
    stored = con.sql("SELECT problem FROM main_dbt_test__audit.sqlnb_tree_structure_tree_pairs_").fetchall()
    con.close()
    assert any(p.startswith("feature region: the pair (region, tier)") for (p,) in stored), stored


@pytest.mark.postgres
def test_dbt_trains_binned_columns_and_the_structures_incrementally_on_postgres(project, tmp_path):
    """The same project on dbt-postgres: the first batch, the second through the
    incremental models, a full refresh; the macro's scores and the model sqlnb dbt-import
    reads from PostgreSQL equal the fit on the same rows (in DuckDB) with the generated
    cut points and structure. Then a batch that moves the structure fails TAN's and
    KDB(2)'s structure tests and leaves their conditional tables as they were."""
    import psycopg

    from support.engines import postgres_engine

    dbt, wh, out = project
    con = duckdb.connect(str(wh))
    tables = {t: con.sql(f"SELECT * FROM {t}").to_arrow_table() for t in ("b1", "b2", "customers")}
    models = {name: sqlnb.load(con, name) for name in FITS}
    con.close()
    with postgres_engine({**tables, "train": tables["b1"]}) as pg:
        for name, model in models.items():
            model.save(pg, name)
        build = postgres_build(dbt, out, tmp_path, "sqlnb_tree_example", pg.dsn, VARS)

        def check(query: str, what: str) -> None:
            d = duckdb.connect(str(wh), read_only=True)
            for name, model in models.items():
                want = _probabilities(_refit(model, d, query).score("customers", d, keep=["id"]).fetchall())
                trained, imported = postgres_trained(pg.dsn, name, CLASSES, tmp_path / f"pg_{name}.parquet")
                _close(_probabilities(trained), want, f"{what}: postgres score_{name}_trained")
                _close(_probabilities(imported), want, f"{what}: postgres sqlnb dbt-import of {name}")
            d.close()

        build()
        check("SELECT * FROM b1", "first batch")
        with psycopg.connect(pg.dsn) as c:
            c.execute("INSERT INTO train SELECT * FROM b2")
        build(*UNCUT)
        check(UNION, "incremental")
        build("--full-refresh", *UNCUT)
        check(UNION, "full refresh")

        d = duckdb.connect(str(wh), read_only=True)  # (d) a batch that moves the structure
        pg.write_table("moving", d.sql(_moving(d)).to_arrow_table())
        d.close()
        with psycopg.connect(pg.dsn) as c:
            c.execute("INSERT INTO train SELECT * FROM moving")
        failed = _run([dbt, "build", "--profiles-dir", str(tmp_path / "profiles"), "--vars", VARS],
                      tmp_path / "pg_project", "dbt build (postgres) over a batch that moves the structure", ok=False)
        _structure_failed(failed, _results(tmp_path / "pg_project"), models)
