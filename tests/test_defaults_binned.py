"""``update`` of a binned model is the refit, a stored rule an
update cannot keep is said on stderr, and ``show --params`` / ``report`` work on every
model kind (binned and TAN on bins were a traceback).

An update recomputes the cut points from the per-(class, value) counts the model keeps
(``stats.cuts``), so the updated model has the refit's cut points exactly and its
probabilities within 1e-9; what cannot be made exact (a tree-augmented model whose binned
pair columns' cut points move, a model stored without those counts) is refused in one
line naming refit. The CLI tests run ``python -m sqlnb`` as real processes.
"""

from __future__ import annotations

import json
import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import UpdateWarning
from support.cli import assert_error, invoke, mixed_table, run_process, snapshot, write_parquet

TOL = 1e-9


def _table(n: int = 1000, seed: int = 0, classes=("a", "b")) -> pa.Table:
    """Two numeric columns whose class dependence MDL and quantiles cut differently in the
    first 700 rows than in all of them (a drift in the last rows), a categorical one,
    a few NULLs."""
    r = np.random.default_rng(seed)
    x = np.round(r.gamma(2.0, 1.0, n), 1)
    late = int(n * 0.7)
    x[late:] += np.round(r.normal(0.6, 0.3, n - late), 1)  # later rows drift: the cut points move
    z = r.normal(size=n)
    y = np.where(x + 0.5 * z + r.normal(size=n) > 2.5, classes[0], classes[1]).astype(object)
    for i, c in enumerate(classes[2:]):
        y[900 + 20 * i:920 + 20 * i] = c  # a class only the later rows have
    xs = [None if i % 23 == 0 else float(v) for i, v in enumerate(x)]
    return pa.table({"x": pa.array(xs, pa.float64()), "z": z, "colour": r.choice(["red", "blue"], n),
                     "w": r.random(n) + 0.5, "y": pa.array(list(y), pa.string())})


def _proba(model, con, table="all") -> np.ndarray:
    rows = model.score(table, con, outputs=("proba",)).fetchall()
    return np.array([r[-len(model.classes):] for r in rows], dtype=float)


def _con(t: pa.Table) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("all", t)
    con.register("first", t.slice(0, 700))
    con.register("rest", t.slice(700))
    return con


# -- update = refit ----------------------------------------------------------------------------
@pytest.mark.parametrize("bins", ["mdl", "quantile:4", {"x": "mdl", "z": "quantile:5"}])
@pytest.mark.parametrize("weighted", [False, True])
def test_update_of_a_binned_model_is_the_refit(bins, weighted):
    con = _con(_table(classes=("a", "b", "c")))  # the update also brings class c
    opts = dict(bins=bins, features=["x", "z", "colour"], weight="w" if weighted else None)
    first = sqlnb.fit("first", "y", con=con, **opts)
    updated = sqlnb.update(first, "rest", con=con)
    refit = sqlnb.fit("all", "y", con=con, **opts)
    assert [f.edges for f in first.features] != [f.edges for f in refit.features]  # the cut points do move
    assert [f.edges for f in updated.features] == [f.edges for f in refit.features]  # exactly
    assert updated.classes == refit.classes == ["a", "b", "c"]
    np.testing.assert_allclose(_proba(updated, con), _proba(refit, con), rtol=0, atol=TOL)


def test_update_in_batches_with_decay_is_the_weighted_refit():
    """Forgetting: after ``update(decay=d)`` the model is the fit in which the first
    batch's rows weigh d. A weighted fit's cut points come from unweighted counts, so the
    cut points are those of all rows, and the per-bin counts are the decayed ones."""
    t = _table()
    con = _con(t)
    con.register("weighted", t.append_column("d", pa.array(np.r_[np.full(700, 0.5), np.ones(300)])))
    first = sqlnb.fit("first", "y", con=con, bins="mdl", features=["x", "z"])
    updated = sqlnb.update(first, "rest", con=con, decay=0.5)
    refit = sqlnb.fit("weighted", "y", con=con, bins="mdl", features=["x", "z"], weight="d")
    assert [f.edges for f in updated.features] == [f.edges for f in refit.features]
    np.testing.assert_allclose(_proba(updated, con), _proba(refit, con), rtol=0, atol=TOL)


def test_update_of_a_stored_binned_model_is_the_refit_and_stores(tmp_path):
    con = _con(_table())
    db = str(tmp_path / "m.duckdb")
    sqlnb.fit("first", "y", con=con, bins="quantile:4").save(db, "q")
    updated = sqlnb.update(sqlnb.load(db, "q"), "rest", con=con)
    updated.save(db, "q2")
    again = sqlnb.update(sqlnb.load(db, "q2"), "rest", con=con)  # the stored counts merge again
    con.register("twice", pa.concat_tables([con.table("all").to_arrow_table(), con.table("rest").to_arrow_table()]))
    refit = sqlnb.fit("twice", "y", con=con, bins="quantile:4")
    assert [f.edges for f in again.features] == [f.edges for f in refit.features]
    np.testing.assert_allclose(_proba(again, con), _proba(refit, con), rtol=0, atol=TOL)


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_cli_update_of_a_binned_model_is_the_refit(tmp_path):
    t = _table()
    first, rest, every = (write_parquet(p, tmp_path / f"{n}.parquet")
                          for n, p in (("first", t.slice(0, 700)), ("rest", t.slice(700)), ("all", t)))
    db = tmp_path / "m.duckdb"
    bins = ["--bins", "x=mdl", "--bins", "z=quantile:4", "--features", "x,z,colour"]
    for data, name in ((first, "up"), (every, "refit")):
        r = run_process("fit", data, "-y", "y", "-m", f"{db}:{name}", *bins, module=True)
        assert r.returncode == 0, r.stderr
    r = run_process("update", rest, "-m", f"{db}:up", module=True)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    up, refit = sqlnb.load(str(db), "up"), sqlnb.load(str(db), "refit")
    assert [f.edges for f in up.features] == [f.edges for f in refit.features]
    con = _con(t)
    np.testing.assert_allclose(_proba(up, con), _proba(refit, con), rtol=0, atol=TOL)


def test_update_that_moves_a_tan_models_binned_cut_points_is_refused_in_one_line(tmp_path):
    t = _table()
    first, rest = write_parquet(t.slice(0, 700), tmp_path / "first.parquet"), write_parquet(
        t.slice(700), tmp_path / "rest.parquet")
    db = tmp_path / "m.duckdb"
    r = run_process("fit", first, "-y", "y", "-m", f"{db}:tan", "--bins", "mdl", "--structure", "tan",
                    "--features", "x,z,colour", module=True)
    assert r.returncode == 0, r.stderr
    before = snapshot(db)
    r = run_process("update", rest, "-m", f"{db}:tan", module=True)
    assert_error(r, "cut points of binned column 'x'", "tree-augmented", "refit")
    assert snapshot(db) == before  # nothing written


def test_tan_binned_update_whose_cut_points_stay_merges_exactly():
    """Pair counts over bins add while the bins stay: the same rows again double every
    count and leave the quantiles where they were."""
    t = _table()
    con = _con(t)
    con.register("first2", pa.concat_tables([t.slice(0, 700), t.slice(0, 700)]))
    opts = dict(bins="quantile:4", structure="tan", features=["x", "z", "colour"])
    updated = sqlnb.update(sqlnb.fit("first", "y", con=con, **opts), "first", con=con)
    refit = sqlnb.fit("first2", "y", con=con, **opts)
    assert [f.edges for f in updated.features] == [f.edges for f in refit.features]
    assert updated.tree() == refit.tree()
    np.testing.assert_allclose(_proba(updated, con), _proba(refit, con), rtol=0, atol=TOL)


def test_update_of_a_binned_model_stored_without_value_counts_is_refused(tmp_path):
    """A model saved before sqlnb kept the value counts (here: one saved without them)
    still loads and scores; its update is refused in one line saying refit."""
    con = _con(_table())
    old = sqlnb.fit("first", "y", con=con, bins="mdl")
    old.stats.cuts = {}  # what an older sqlnb stored: no cut_counts part
    db = tmp_path / "m.duckdb"
    old.save(str(db), "old")
    loaded = sqlnb.load(str(db), "old")
    np.testing.assert_allclose(_proba(loaded, con), _proba(old, con), rtol=0, atol=0)
    rest = write_parquet(_table().slice(700), tmp_path / "rest.parquet")
    before = snapshot(db)
    r = run_process("update", rest, "-m", f"{db}:old", module=True)
    assert_error(r, "binned column 'x'", "no stored value counts", "refit")
    assert snapshot(db) == before


# -- a stored rule an update cannot keep is said ----------------------------------------------
@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_cli_update_with_a_new_class_says_what_became_of_the_cost_rule(tmp_path):
    first = write_parquet(mixed_table(120, seed=1, classes=("a", "b", "c")), tmp_path / "first.parquet")
    more = write_parquet(mixed_table(60, seed=2, classes=("a", "b", "c", "d")), tmp_path / "more.parquet")
    costs = tmp_path / "costs.csv"
    costs.write_text("actual,predicted,cost\na,c,5\n")
    db = tmp_path / "m.duckdb"
    for args in (("fit", first, "-y", "y", "--exclude", "id", "-m", f"{db}:nb"),
                 ("decide", "-m", f"{db}:nb", "--costs", costs)):
        r = run_process(*args, module=True)
        assert r.returncode == 0, r.stderr
    r = run_process("update", more, "-m", f"{db}:nb", module=True)
    assert r.returncode == 0, r.stderr
    assert "added class 'd'" in r.stderr and "cost matrix" in r.stderr and "sqlnb decide" in r.stderr, r.stderr
    rule = sqlnb.load(str(db), "nb").decision
    want = 1.0 - np.eye(4)
    want[0, 2] = 5.0  # the cost given stays; class d's pairs take the default 0/1
    assert rule is not None and np.array_equal(rule.loss(), want)


def test_update_with_a_new_class_says_a_threshold_no_longer_applies():
    con = duckdb.connect()
    con.register("two", mixed_table(120, seed=1, classes=("a", "b")))
    con.register("three", mixed_table(60, seed=2, classes=("a", "b", "c")))
    m = sqlnb.fit("two", "y", con=con, exclude=["id"])
    from sqlnb.models.decision import DecisionRule
    m.decision = DecisionRule.for_model(m, threshold="b=0.3")
    with pytest.warns(UpdateWarning, match="no longer applies.*most probable class"):
        up = sqlnb.update(m, "three", con=con)
    assert up.decision is None or up.decision.is_default
    with warnings.catch_warnings():
        warnings.simplefilter("error", UpdateWarning)  # the same classes: kept, nothing said
        assert sqlnb.update(m, "two", con=con).decision == m.decision


# -- show --params and report on every model kind ---------------------------------------------
KINDS = {
    "mdl": ["--bins", "mdl"],
    "quantile": ["--bins", "quantile:4"],
    "tan_bins": ["--bins", "mdl", "--structure", "tan"],
    "tan_quantile": ["--bins", "quantile:3", "--structure", "tan"],
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_show_params_and_report_on_binned_models(tmp_path, kind):
    data = write_parquet(_table(400).drop(["w"]), tmp_path / "d.parquet")
    db = tmp_path / "m.duckdb"
    r = invoke("fit", data, "-y", "y", "-m", f"{db}:m", *KINDS[kind])
    assert r.exit_code == 0, r.stderr
    r = invoke("show", "--params", "-m", f"{db}:m")
    assert r.exit_code == 0, r.stderr
    assert "binned features: p(bin | class)" in r.stdout and "< " in r.stdout and ">= " in r.stdout, r.stdout
    r = invoke("show", "--params", "--format", "json", "-m", f"{db}:m")
    assert r.exit_code == 0 and json.loads(r.stdout)
    r = invoke("report", data, "-m", f"{db}:m", "-o", tmp_path / "r.html")
    assert r.exit_code == 0, r.stderr
    assert "p(bin | class)" in (tmp_path / "r.html").read_text()


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_show_params_and_report_of_a_tan_model_on_bins_as_processes(tmp_path):
    """The reported commands themselves, as a user runs them: exit 0, no traceback."""
    data = write_parquet(_table(400).drop(["w"]), tmp_path / "d.parquet")
    db = tmp_path / "m.duckdb"
    r = run_process("fit", data, "-y", "y", "-m", f"{db}:m", "--bins", "mdl", "--structure", "tan", module=True)
    assert r.returncode == 0, r.stderr
    for args in (("show", "--params", "-m", f"{db}:m"), ("report", data, "-m", f"{db}:m", "-o", tmp_path / "r.html")):
        r = run_process(*args, module=True)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_show_params_of_a_binned_model_are_its_probabilities():
    """The table's numbers are the model's own p(bin | class), one row per bin."""
    from sqlnb.workflows.parameters import parameters
    con = _con(_table())
    m = sqlnb.fit("all", "y", con=con, bins="mdl", features=["x", "z"])
    got = parameters(m)
    json.dumps(got)  # JSON-ready
    for f, d in zip(m.features, got["features"]):
        _, flp, _ = m.log_parameters()[f.name]
        assert d["edges"] == list(f.edges) and len(d["values"]) == len(f.edges) + 1
        np.testing.assert_allclose(d["proba"], np.exp(flp), rtol=1e-15)
        np.testing.assert_allclose(np.sum(d["proba"], axis=1), 1.0, atol=1e-12)


def test_show_params_and_report_on_every_model_kind():
    """Every kind one fit away, in-process: ``parameters`` and the report's parameter
    tables do not fail (the path that crashed for binned models)."""
    from sqlnb.workflows.parameters import parameter_tables, parameters
    t = _table(300)
    con = duckdb.connect()
    con.register("t", t.drop(["w"]))
    counts = pa.table({"n1": np.arange(300) % 4, "n2": (np.arange(300) * 7) % 5, "y": t["y"]})
    con.register("counts", counts)
    fits = [dict(), dict(bins="mdl"), dict(bins="quantile:3"), dict(bins="mdl", structure="tan"),
            dict(features=["colour", "z"], feature_kinds={"z": "bernoulli"}, structure="tan"), dict(tied_variance=True, features=["x", "z"]),
            dict(model="lda", features=["z"]), dict(model="qda", features=["z"]),
            dict(model="logistic", features=["z"])]
    for opts in fits:
        m = sqlnb.fit("t", "y", con=con, **opts)
        assert parameter_tables(parameters(m)), opts
    for kind in ("bernoulli", "multinomial", "complement"):
        m = sqlnb.fit("counts", "y", con=con, kind=kind)
        assert parameter_tables(parameters(m)), kind
