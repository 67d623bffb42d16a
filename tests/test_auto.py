"""``sqlnb fit --auto`` (:mod:`sqlnb.workflows.auto`): candidates chosen by cross-validation
on the training rows, within a time budget, the best refitted on every row."""

from __future__ import annotations

import numpy as np
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.workflows.auto import STAGES, auto_fit
from support.cli import invoke, run_process
from support.structured import class_scores, registered, tan_table


FEATURES = ["a", "b", "e", "noise"]


@pytest.fixture(scope="module")
def data():
    return registered(tan_table(240, 4), tan_table(80, 5, unseen=True))


def _refit(con, row):
    params = dict(row["params"])
    return sqlnb.fit("train", "y", con=con, model=row["model"], features=FEATURES, bins="mdl", **params)


def test_a_tight_budget_runs_the_first_stage_and_says_what_it_left_out(data):
    con, _, _ = data
    result = auto_fit("train", "y", con=con, budget=1e-6, features=FEATURES)
    assert {r["stage"] for r in result.tried} == {STAGES[0][0]}
    assert result.skipped == [s[0] for s in STAGES[1:]]
    assert [r["params"]["alpha"] for r in result.tried] == [0.5, 1.0, 2.0]
    best = max(result.tried, key=lambda r: (r["accuracy"], -r["log_loss"]))
    assert result.best is best and result.table().splitlines()[1 + result.tried.index(best)].startswith("* ")
    # the winner is the fit with its parameters on every training row
    np.testing.assert_allclose(class_scores(result.model, "test", con, "proba"),
                               class_scores(_refit(con, best), "test", con, "proba"), rtol=0, atol=1e-12)
    assert result.model.report["auto"]["skipped"] == result.skipped


@pytest.mark.slow  # every stage: a few cross-validations of structured models
def test_every_stage_within_the_default_budget(data):
    con, _, _ = data
    result = auto_fit("train", "y", con=con, features=FEATURES)
    assert result.skipped == [] and {r["stage"] for r in result.tried} == {s[0] for s in STAGES}
    kinds = {(r["model"], r["params"].get("structure", "naive")) for r in result.tried}
    assert kinds == {("naive_bayes", s) for s in ("naive", "tan", "kdb:1", "aode", "kdb:2", "tan+kdb:2+aode")} \
        | {("weighted", "naive")}
    best = max(result.tried, key=lambda r: (r["accuracy"], -r["log_loss"]))
    assert result.best is best
    np.testing.assert_allclose(class_scores(result.model, "test", con, "proba"),
                               class_scores(_refit(con, best), "test", con, "proba"), rtol=0, atol=1e-9)


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
