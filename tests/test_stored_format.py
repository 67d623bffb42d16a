"""A model saved by an earlier release loads and scores identically.

``fixtures/wave1_models.duckdb.gz`` was written by main at 7313a04 (before the package
layout of issue 13) with ``fixtures/make_wave1_models.py``: six models (mixed, text and
Bernoulli-text naive Bayes, LDA, QDA, logistic regression), the input table they were
scored on, and each model's scores from that release. Loading them with today's code must
give the same rows, in the same order, with the same numbers.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest

import sqlnb

FIXTURE = Path(__file__).parent / "fixtures" / "wave1_models.duckdb.gz"
MODELS = ("nb_mixed", "nb_text", "nb_bernoulli_text", "lda", "qda", "logistic")


@pytest.fixture(scope="module")
def wave1(tmp_path_factory):
    path = tmp_path_factory.mktemp("stored") / "wave1_models.duckdb"
    with gzip.open(FIXTURE, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def test_the_fixture_lists_every_model(wave1):
    assert sorted(m["name"] for m in sqlnb.models(str(wave1))) == sorted(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_an_earlier_release_model_scores_identically(wave1, name):
    model = sqlnb.load(str(wave1), name)
    con = duckdb.connect(str(wave1), read_only=True)
    got = model.score("fixture_input", con, keep=["id"]).to_arrow_table().to_pydict()
    want = con.sql(f'SELECT * FROM "expected_{name}" ORDER BY id').to_arrow_table().to_pydict()
    con.close()
    assert list(got) == list(want)
    order = np.argsort(got["id"])
    assert [got["id"][i] for i in order] == want["id"]
    for column in want:
        g = [got[column][i] for i in order]
        if column == "prediction" or column == "id":
            assert g == want[column], column
        else:
            np.testing.assert_array_equal(np.array(g, dtype=float), np.array(want[column], dtype=float),
                                          err_msg=column)
