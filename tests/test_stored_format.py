"""A model saved by an earlier release loads and scores as it did.

``fixtures/models_7313a04.duckdb.gz`` was written by main at 7313a04 (before the package
layout moved) with ``fixtures/make_models_7313a04.py``: six models (mixed, text and
Bernoulli-text naive Bayes, LDA, QDA, logistic regression), the input table they were
scored on, and each model's scores from that release. Loading them with today's code must
give the same rows, in the same order, with the same predictions and the same numbers
(within 1e-12: the fixture's were computed on another CPU).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest

import sqlnb
from sqlnb.models.finish import OUTPUTS
from support.stored import assert_scores_as_stored

FIXTURE = Path(__file__).parent / "fixtures" / "models_7313a04.duckdb.gz"
MODELS = ("nb_mixed", "nb_text", "nb_bernoulli_text", "lda", "qda", "logistic")


@pytest.fixture(scope="module")
def earlier_release(tmp_path_factory):
    path = tmp_path_factory.mktemp("stored") / "models_7313a04.duckdb"
    with gzip.open(FIXTURE, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def test_the_fixture_lists_every_model(earlier_release):
    assert sorted(m["name"] for m in sqlnb.list_models(str(earlier_release))) == sorted(MODELS)


def _same(got: dict, want: dict) -> None:
    """Row for row, in the order given: ids and predictions equal, numbers as stored
    (tests/support/stored.py: within 1e-12, the fixture was computed on another CPU)."""
    assert got["id"] == want["id"]  # same rows, in the same order
    assert_scores_as_stored(got, want)


@pytest.mark.parametrize("name", MODELS)
def test_an_earlier_release_model_scores_identically(earlier_release, name):
    """The stored input scored as stored (DuckDB keeps a table's insertion order on a
    scan), and the same rows in a shuffled order, which the output must follow: the
    stored input is in id order, so output sorted by id would pass the first check."""
    model = sqlnb.load(str(earlier_release), name)
    con = duckdb.connect(str(earlier_release), read_only=True)
    got = model.score("fixture_input", con, keep=["id"], outputs=OUTPUTS).to_arrow_table().to_pydict()
    want = con.sql(f'SELECT * FROM "expected_{name}"').to_arrow_table()
    assert con.sql("SELECT id FROM fixture_input").fetchall() == [(i,) for i in want["id"].to_pylist()]
    _same(got, want.to_pydict())
    order = np.random.default_rng(7).permutation(len(want))
    shuffled = con.sql("SELECT * FROM fixture_input").to_arrow_table().take(order)
    got = model.score(shuffled, con, keep=["id"], outputs=OUTPUTS).to_arrow_table().to_pydict()
    con.close()
    _same(got, want.take(order).to_pydict())


def test_the_stored_comparison_forgives_the_last_bits_and_nothing_more():
    """A fixture's numbers may differ from this CPU's in the last bits (LAPACK, libm), never
    more: 6.7e-16 (LDA's ``jll`` on an AMD EPYC against the writer's CPU) passes, 1e-9 fails,
    and a prediction that differs fails whatever the numbers."""
    want = {"id": [1, 2], "prediction": ["a", "b"], "jll_a": [-3.25, -120.5], "proba_a": [0.25, None]}
    close = {**want, "jll_a": [-3.25 + 6.7e-16, -120.5 * (1 + 4e-16)]}
    assert_scores_as_stored(close, want)
    for bad in ({**want, "jll_a": [-3.25 + 1e-9, -120.5]}, {**want, "proba_a": [0.25, 0.5]},
                {**want, "prediction": ["a", "a"]}):
        with pytest.raises(AssertionError):
            assert_scores_as_stored(bad, want)
