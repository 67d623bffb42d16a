"""``sqlnb fit --auto`` (:mod:`sqlnb.workflows.auto`): candidates chosen by cross-validation
on the training rows, within a time budget, the best refitted on every row."""

from __future__ import annotations

import numpy as np
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.workflows.auto import OTHER_BINS, REFINEMENTS, STAGES, auto_fit
from support.cli import invoke, run_process
from support.structured import class_scores, registered, tan_table


FEATURES = ["a", "b", "e", "noise"]


@pytest.fixture(scope="module")
def data():
    return registered(tan_table(240, 4), tan_table(80, 5, unseen=True))


def _refit(con, row, model=None):
    """``row``'s candidate fitted on every training row; a weighted one with the penalty the
    winner's refit chose (cross_validate's nested choice, over its own folds)."""
    params = dict(row["params"])
    if row["model"] == "weighted" and model is not None:
        params["l2"] = model.l2
    return sqlnb.fit("train", "y", con=con, model=row["model"], features=row["features"] or FEATURES,
                     bins=row["bins"], **params)


def test_a_tight_budget_runs_the_first_stage_and_says_what_it_left_out(data):
    con, _, _ = data
    result = auto_fit("train", "y", con=con, budget=1e-6, features=FEATURES)
    assert {r["stage"] for r in result.tried} == {STAGES[0][0]}
    assert result.skipped == [*(s[0] for s in STAGES[1:]), *REFINEMENTS]
    assert [r["params"]["alpha"] for r in result.tried] == [0.5, 1.0, 2.0]
    best = max(result.tried, key=lambda r: (r["accuracy"], -r["log_loss"]))
    assert result.best is best and result.table().splitlines()[1 + result.tried.index(best)].startswith("* ")
    # the winner is the fit with its parameters on every training row
    np.testing.assert_allclose(class_scores(result.model, "test", con, "proba"),
                               class_scores(_refit(con, best, result.model), "test", con, "proba"), rtol=0, atol=1e-12)
    assert result.model.report["auto"]["skipped"] == result.skipped


@pytest.mark.slow  # every stage: a few cross-validations of structured models
def test_every_stage_within_the_default_budget(data):
    con, _, _ = data
    result = auto_fit("train", "y", con=con, features=FEATURES)
    assert result.skipped == []
    assert {r["stage"] for r in result.tried} == {s[0] for s in STAGES} | {"bins"} | (
        {"features"} if any(r["features"] for r in result.tried) else set())
    kinds = {(r["model"], r["params"].get("structure", "naive")) for r in result.tried}
    assert kinds == {("naive_bayes", s) for s in ("naive", "eskdb", "tan", "kdb:1", "aode", "kdb:2",
                                                  "tan+kdb:2+aode")} | {("weighted", "naive")}
    # the ensemble at alpha 1 only (auto.STAGE_ALPHAS), every other count-based structure at each alpha
    alphas = {s[0]: sorted(r["params"]["alpha"] for r in result.tried if r["stage"] == s[0])
              for s in (STAGES[1], STAGES[3])}
    assert alphas == {"ensemble of selective KDBs": [1.0], "one-dependence structures": [0.5] * 3 + [1.0] * 3 + [2.0] * 3}
    best = max(result.tried, key=lambda r: (r["accuracy"], -r["log_loss"]))
    assert result.best is best
    # the bins stage: the best candidate of the structure stages, with each other discretisation
    lead = max((r for r in result.tried if r["stage"] in {s[0] for s in STAGES}),
               key=lambda r: (r["accuracy"], -r["log_loss"]))
    binned = [r for r in result.tried if r["stage"] == "bins"]
    assert [r["bins"] for r in binned] == list(OTHER_BINS)
    assert all((r["model"], r["params"], r["features"]) == (lead["model"], lead["params"], None) for r in binned)
    assert all(r["bins"] == "mdl" for r in result.tried if r["stage"] != "bins" and r["stage"] != "features")
    np.testing.assert_allclose(class_scores(result.model, "test", con, "proba"),
                               class_scores(_refit(con, best, result.model), "test", con, "proba"), rtol=0, atol=1e-9)


def test_bad_budgets_are_refused(data):
    con, _, _ = data
    for bad in (0, -1, True, "5"):
        with pytest.raises(SqlnbError, match="the time budget must be a positive number of seconds"):
            auto_fit("train", "y", con=con, budget=bad)


def test_cli_auto_prints_the_table_and_saves_the_winner(tmp_path):
    import pyarrow.csv as csv
    csv.write_csv(tan_table(200, 6).select(["a", "b", "e", "noise", "y"]), tmp_path / "train.csv")
    store = f"{tmp_path / 'm.duckdb'}:best"
    done = run_process("fit", str(tmp_path / "train.csv"), "--label", "y", "--auto", "--budget", "0.000001",
                       "--model", store)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["model", "accuracy", "log", "loss", "stage", "s"]
    assert sum(line.startswith("* ") for line in lines) == 1 and "not tried (time budget)" in lines[-1]
    shown = run_process("show", "--model", store)
    assert shown.returncode == 0 and "naive_bayes" in shown.stdout.splitlines()[0]
    for args, message in ((["--auto", "--alpha", "2"], "--auto chooses the model kind, structure, smoothing and "
                                                        "bins itself; leave out alpha"),
                          (["--auto", "--kind", "lda"], "leave out --kind lda"),
                          (["--budget", "5"], "--budget is the time budget of --auto")):
        result = invoke("fit", str(tmp_path / "train.csv"), "--label", "y", *args, "--model", store, "--replace")
        assert result.exit_code == 2 and message in result.stderr, (args, result.stderr)


def _newcomer_csv(path, draw) -> None:
    """60 rows: an id, age (some empty), plan (some empty), visits, referrer (empty in
    every row) and a yes/no label that mostly follows visits < 6; ``draw(lo, hi)`` an
    integer."""
    lines = ["id,age,plan,visits,referrer,churn"]
    for i in range(60):
        age = "" if i % 11 == 0 else str(20 + draw(0, 40))
        plan = "" if i % 7 == 0 else ["basic", "pro", "max"][draw(0, 2)]
        visits = draw(0, 20)
        lines.append(f"{i},{age},{plan},{visits},,{'yes' if (visits < 6) != (draw(0, 99) < 15) else 'no'}")
    path.write_text("\n".join(lines) + "\n")


def test_cli_auto_on_a_hand_written_csv_with_an_excluded_id_and_empty_cells(tmp_path):
    """A newcomer's CSV: an id column left out, a yes/no label, empty cells, a column
    empty in every row. The features stage cross-validates the features TAN keeps without
    the excluded id (it passed both the kept features and ``--exclude``, which
    cross-validation refuses); the winner is saved and scores every row, in order. (A
    column empty in every row, which a TAN selection keeps, once made the learnt weights'
    scan an ENUM of no values: tests/test_weighted.py.)"""
    import random
    _newcomer_csv(tmp_path / "c.csv", random.Random(2).randint)
    store = f"{tmp_path / 'm.duckdb'}:a"
    done = run_process("fit", str(tmp_path / "c.csv"), "--label", "churn", "--exclude", "id", "--auto",
                       "--model", store)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("* ") for line in lines) == 1
    assert any(line.rstrip(" .0123456789").endswith(("1 feature", "features")) for line in lines), done.stdout
    scored = run_process("score", str(tmp_path / "c.csv"), "--model", store, "--keep", "id")
    assert scored.returncode == 0, scored.stderr
    assert [int(r.split(",")[0]) for r in scored.stdout.splitlines()[1:]] == list(range(60))


def test_candidates_the_data_cannot_build_are_table_lines_not_the_search_s_error():
    """One categorical column: no two discrete features to pair, so every structure is refused. The search says so per stage
    (``refused``, a table line with the reason) and the winner is naive Bayes's."""
    import duckdb
    import random
    rng = random.Random(0)
    con = duckdb.connect()
    con.execute("CREATE TABLE t (plan VARCHAR, y VARCHAR)")
    rows = [(p, "yes" if (p == "pro") != (rng.random() < 0.1) else "no")
            for p in (rng.choice(["basic", "pro", "max"]) for _ in range(90))]
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    found = auto_fit("t", "y", con=con)
    assert set(found.refused) == {"ensemble of selective KDBs", "one-dependence structures", "two-dependence structures",
                                  "features"}, found.refused
    assert all("need at least two discrete features" in why for why in found.refused.values())
    assert found.best["params"].get("structure", "naive") == "naive" and found.model.report["auto"]["refused"]
    table = found.table()
    assert "  one-dependence structures: not tried (structures built on pair counts" in table, table


def test_the_features_stage_cross_validates_the_features_a_backward_selection_keeps(data, monkeypatch):
    """The features stage: TAN's backward selection over the same folds, then the leading
    candidate on the features it keeps; nothing when it keeps them all."""
    con, _, _ = data
    import sqlnb.workflows.auto as auto

    monkeypatch.setattr(auto, "STAGES", STAGES[:1])  # naive Bayes only, then the refinements
    result = auto_fit("train", "y", con=con, features=FEATURES)
    lead = max((r for r in result.tried if r["stage"] == STAGES[0][0]), key=lambda r: (r["accuracy"], -r["log_loss"]))
    chosen = sqlnb.select_features("train", "y", con=con, direction="backward", structure="tan",
                                   bins=max((r for r in result.tried if r["stage"] != "features"),
                                            key=lambda r: (r["accuracy"], -r["log_loss"]))["bins"],
                                   features=FEATURES, folds=5, seed=0, refit=False).features
    rows = [r for r in result.tried if r["stage"] == "features"]
    if len(chosen) == len(FEATURES):
        assert rows == []
    else:
        assert len(rows) == 1 and rows[0]["features"] == list(chosen) and rows[0]["model"] == lead["model"]
        assert "noise" not in chosen
    np.testing.assert_allclose(class_scores(result.model, "test", con, "proba"),
                               class_scores(_refit(con, result.best, result.model), "test", con, "proba"),
                               rtol=0, atol=1e-9)


def test_the_estimator_is_auto_fit_on_the_rows_it_is_given(data):
    """AutoNB: auto_fit on X, y (registered as a table), its search kept, the winner predicting."""
    import pickle

    import pandas as pd
    from sklearn.base import clone

    from sqlnb.estimators import AutoNB

    con, _, _ = data
    train = con.sql('SELECT a, b, e, noise, y FROM "train" WHERE y IS NOT NULL').df()
    test = con.sql('SELECT a, b, e, noise FROM "test"').df()
    X, y = train[FEATURES], train["y"]
    clf = AutoNB(budget=1e-6).fit(X, y)
    assert clone(clf).get_params() == {"budget": 1e-6, "folds": 5, "seed": 0}
    assert [r["stage"] for r in clf.tried_] == [STAGES[0][0]] * 3 and clf.best_ is clf.search_.best
    expected = auto_fit("train", "y", con=con, budget=1e-6, features=FEATURES)
    assert expected.best["params"] == clf.best_["params"]
    np.testing.assert_allclose(clf.predict_proba(test), class_scores(expected.model, "test", con, "proba"),
                               rtol=0, atol=1e-12)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(test), clf.predict(test))
    assert len(clf.predict(test)) == len(test) and isinstance(test, pd.DataFrame)
    with pytest.raises(TypeError, match="sample_weight"):
        AutoNB(budget=1e-6).fit(X, y, sample_weight=np.ones(len(y)))


def test_fit_with_auto_returns_the_winner_and_keeps_plain_fit(data):
    con, _, _ = data
    model = sqlnb.fit("train", "y", con=con, auto=True, budget=1e-6, features=FEATURES)
    result = auto_fit("train", "y", con=con, budget=1e-6, features=FEATURES)
    np.testing.assert_array_equal(class_scores(model, "test", con, "proba"),
                                  class_scores(result.model, "test", con, "proba"))
    assert model.report["auto"]["skipped"] == result.skipped
    assert [r["params"] for r in model.report["auto"]["tried"]] == [r["params"] for r in result.tried]
    # without auto=True, sqlnb.fit is the plain fit, and help(sqlnb.fit) documents both
    plain = sqlnb.fit("train", "y", con=con, features=FEATURES, alpha=2.0)
    assert "auto" not in plain.report
    np.testing.assert_array_equal(class_scores(plain, "test", con, "proba"),
                                  class_scores(sqlnb.api.fit("train", "y", con=con, features=FEATURES, alpha=2.0),
                                               "test", con, "proba"))
    assert "auto : bool" in sqlnb.fit.__doc__ and "label : str" in sqlnb.fit.__doc__


@pytest.mark.parametrize("options, named", [({"structure": "tan"}, "structure"), ({"model": "lda", "alpha": 1.0},
                                                                                    "alpha, model")])
def test_fit_with_auto_refuses_what_the_search_chooses(data, options, named):
    con, _, _ = data
    with pytest.raises(SqlnbError, match=f"auto=True chooses {named} itself"):
        sqlnb.fit("train", "y", con=con, auto=True, features=FEATURES, **options)
    with pytest.raises(SqlnbError, match="budget is the time budget of auto=True"):
        sqlnb.fit("train", "y", con=con, budget=10, features=FEATURES)
