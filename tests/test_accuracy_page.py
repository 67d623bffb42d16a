"""docs/accuracy.md is what benchmarks/accuracy.py writes: its table is rendered from the
raw figures in docs/accuracy.json, and the votes column of the cheaper rows is recomputed
here (nested CV with fixed seeds, LightGBM and XGBoost on one thread: the same figures to
the last digit shown). ``SQLNB_DOCS_UPDATE=1`` rewrites the page's block from the JSON.

The rest of the page (adult, mushroom, spambase, and the rows whose nested CV takes minutes)
is written by the script only: ``python benchmarks/accuracy.py --out docs/accuracy.md``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support import shared_data as sd
from support.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
#: The rows recomputed on votes: sqlnb's naive Bayes (α by nested CV) and every peer that
#: costs seconds (the tuned LightGBM's 45 fits per fold are left to the script).
RECOMPUTED = ["naive Bayes", "LightGBM defaults", "XGBoost defaults", "HistGradientBoosting defaults",
              "random forest, 500 trees, one-hot", "logistic regression, one-hot, scaled"]

pytestmark = [pytest.mark.slow, pytest.mark.shared_data]  # nested CV on votes: ~30 s


@pytest.fixture(scope="module")
def acc():
    return load_script(SCRIPT, "accuracy_benchmark")


def test_the_page_is_the_tables_of_the_raw_figures(acc):
    text = acc.PAGE.read_text()
    block = acc.shown(text)
    assert block is not None, f"{acc.PAGE.name} has no {acc.MARKERS[0]} ... block"
    data = json.loads(acc.JSON.read_text())
    written = acc.tables(data["results"]) + "\n\n" + acc.provenance(data["runs"])
    if os.environ.get("SQLNB_DOCS_UPDATE"):
        acc.PAGE.write_text(acc.replaced(text, written))
        return
    assert block == written, f"{acc.PAGE.name} differs from the tables of {acc.JSON.name}:\n{written}"


def test_every_model_and_data_set_has_its_figures(acc):
    """Every row of the registry on every data set (the selection row on adult only), and
    each figure is a proportion or a positive log loss."""
    results = json.loads(acc.JSON.read_text())["results"]
    assert list(results) == list(acc.DATASETS) or set(results) == set(acc.DATASETS)
    for name in acc.DATASETS:
        expected = [m for m in acc.model_names() if name in acc.ONLY.get(m, (name,))]
        assert sorted(results[name]) == sorted(expected), name
        for m, f in results[name].items():
            assert 0 <= f["error"] < 0.5 and f["log_loss"] > 0 and f["seconds"] > 0, (name, m, f)
            assert len(f["folds"]) == (1 if name.startswith("adult") else acc.OUTER_FOLDS), (name, m)
    assert results["adult-complete"]["naive Bayes"]["rows"] == 15060
    assert results["adult-all"]["naive Bayes"]["rows"] == 16281
    assert {f["rows"] for f in results["votes"].values()} == {435}


def test_sqlnb_candidates_are_fit_keywords(acc):
    """Each sqlnb row is a name and sqlnb.fit keywords; the CV-chosen row chooses among rows
    of the registry. A new model kind is one entry."""
    candidates = dict(acc.sqlnb_candidates())
    assert {"naive Bayes", "TAN", "AODE", "KDB(2)", "TAN+KDB(2)+AODE"} <= set(candidates)
    assert candidates["KDB(2)"]["structure"] == "kdb:2"
    for name, kwargs in candidates.items():
        among = kwargs.get("structure")
        if isinstance(among, dict):
            assert set(among["among"]) <= set(candidates) - {name}


def test_the_votes_column_is_recomputed(acc):
    sd.require_shared_data("votes")
    found = acc.run(["votes"], RECOMPUTED, log=lambda _: None)["votes"]
    cells = acc.table_cells(acc.shown(acc.PAGE.read_text()))
    for m in RECOMPUTED:
        assert cells[(m, "votes")] == acc.cell(found[m]), (m, found[m])


def test_an_unknown_model_is_one_error_line(acc):
    with pytest.raises(SystemExit, match=r"^Error: unknown model 'lightgbm'; models are: naive Bayes, "):
        acc.run(["votes"], ["lightgbm"])


def test_the_cv_chosen_row_takes_each_folds_best_inner_cv_member(acc):
    """Per outer fold, the member with the highest inner-CV accuracy (ties: lower log loss),
    its test figures and choices; the seconds of every member, since all were fitted."""
    def fold(error, cv_accuracy, cv_log_loss, seconds):
        return {"error": error, "log_loss": 0.1, "rows": 10, "seconds": seconds, "chosen": {"alpha": 1.0},
                "cv_accuracy": cv_accuracy, "cv_log_loss": cv_log_loss}

    members = {"naive Bayes": [fold(0.3, 0.80, 0.4, 1.0), fold(0.2, 0.90, 0.3, 2.0)],
               "TAN": [fold(0.1, 0.85, 0.5, 3.0), fold(0.4, 0.90, 0.2, 4.0)]}
    chosen = acc.chosen_among(members)
    assert [f["error"] for f in chosen] == [0.1, 0.4]
    assert [f["chosen"]["structure"] for f in chosen] == ["TAN", "TAN"]
    assert [f["seconds"] for f in chosen] == [4.0, 6.0]
    assert acc.among("structure chosen by CV", "spambase") == ["naive Bayes", "TAN", "KDB(2)"]
    assert acc.among("structure chosen by CV", "votes") == ["naive Bayes", "TAN", "AODE", "KDB(2)", "TAN+KDB(2)+AODE"]
    assert acc.among("TAN", "votes") is None
