"""Feature selection on the structures built on pair counts (TAN, AODE, KDB).

``select_k`` keeps the kept features' pair counts and learns the structure on them: the
model equals a fit on exactly those features (when the pair counts were dropped with the
others, every such fit failed with "structure 'tan' needs the pair counts of a
tree-augmented fit; refit with structure='tan'", the structure the user had asked for).
``NaiveBayes.select`` of a tree-augmented model and wrapper selection on it are below.
Wrapper selection in general is tests/test_select.py.
"""

from __future__ import annotations

import subprocess
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from support.structured import DISCRETE, probabilities, tan_data

STRUCTURES = ["tan", "aode", "kdb:1", "kdb:2"]


@pytest.fixture(scope="module")
def con():
    rng = np.random.default_rng(0)
    n = 400
    y = rng.integers(0, 3, n)
    cols = {}
    for j in range(6):  # columns of decreasing dependence on the class, and on each other
        noise = rng.integers(0, 2 + j, n)
        base = y if j % 2 == 0 else (y + np.asarray(cols[f"c{j - 1}"] == "a", dtype=int))
        cols[f"c{j}"] = np.array(list("abcdefgh"))[(base + noise) % 5]
    c = duckdb.connect()
    c.register("rows", pa.table({**cols, "y": y}))
    return c


@pytest.mark.parametrize("structure", STRUCTURES)
def test_select_k_with_a_paired_structure_is_the_fit_on_the_kept_features(con, structure):
    chosen = sqlnb.fit("rows", "y", con=con, structure=structure, select_k=3, screen=False)
    kept = [f.name for f in chosen.features]
    assert len(kept) == 3 and chosen.report["select_k"]["kept"] == 3
    direct = sqlnb.fit("rows", "y", con=con, structure=structure, features=kept, screen=False)
    assert chosen.tree() == direct.tree()
    a = chosen.score("rows", con=con).fetchnumpy()
    b = direct.score("rows", con=con).fetchnumpy()
    for c in chosen.classes:
        np.testing.assert_allclose(a[f"proba_{c}"], b[f"proba_{c}"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(a["prediction"], b["prediction"])


def test_the_cli_fits_it(tmp_path, con):
    data = tmp_path / "d.parquet"
    con.execute("COPY rows TO ? (FORMAT parquet)", [str(data)])
    done = subprocess.run([sys.executable, "-m", "sqlnb", "fit", str(data), "--label", "y", "--structure", "kdb:2",
                           "--select-k", "4", "--model", f"{tmp_path / 'm.duckdb'}:m"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    model = sqlnb.load(str(tmp_path / "m.duckdb"), "m")
    assert len(model.features) == 4 and model.hyper.structure == "kdb:2"


def test_numbers_only_names_the_fix(tmp_path):
    """Integer-coded categories read from a CSV are numbers (Gaussian): a paired structure
    has nothing to pair, and the error says how numeric columns take part."""
    rng = np.random.default_rng(1)
    path = tmp_path / "codes.csv"
    y = rng.integers(0, 2, 200)
    pa_table = pa.table({**{f"c{j}": (y + rng.integers(0, 3, 200)) % 4 for j in range(4)}, "y": y.astype(str)})
    duckdb.connect().register("t", pa_table).execute("COPY t TO ? (FORMAT csv, HEADER)", [str(path)])
    done = subprocess.run([sys.executable, "-m", "sqlnb", "fit", str(path), "--label", "y", "--structure", "tan",
                           "--model", f"{tmp_path / 'm.duckdb'}:m"], capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "has none" in done.stderr and "--bins mdl" in done.stderr and "--feature-kind" in done.stderr
    binned = subprocess.run([sys.executable, "-m", "sqlnb", "fit", str(path), "--label", "y", "--structure", "tan",
                             "--bins", "mdl", "--model", f"{tmp_path / 'm.duckdb'}:m"], capture_output=True, text=True)
    assert binned.returncode == 0, binned.stderr


# --------------------------------------------------------------------------------------------
# Tree-augmented naive Bayes restricted to a subset of its features: ``NaiveBayes.select``
# keeps only the pair counts among the kept tree features, so the subset's model equals a
# tree-augmented fit on those features alone (the tree is re-derived among them), and
# wrapper selection (``sqlnb.select_features(..., structure="tan")``) runs on it.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data():
    return tan_data()


@pytest.mark.parametrize("subset", [["a", "e", "flag"], ["b", "noise"]])
def test_select_equals_a_fit_on_the_subset(data, subset):
    con, _, _ = data
    kinds = {**DISCRETE, "g": "gaussian"}
    full = sqlnb.fit("train", label="y", con=con, features=list(kinds), feature_kinds=kinds, structure="tan")
    keep = [*subset, "g"]
    part = full.select(keep)
    refit = sqlnb.fit("train", label="y", con=con, features=keep, feature_kinds={k: kinds[k] for k in keep},
                      structure="tan")
    assert part.tree() == refit.tree()
    assert list(part.stats.pairs.features) == list(refit.stats.pairs.features)
    np.testing.assert_allclose(probabilities(part, "test", con), probabilities(refit, "test", con),
                               rtol=0, atol=1e-9)


def test_wrapper_selection_of_a_tree(data):
    con, _, _ = data
    s = sqlnb.select_features("train", "y", con=con, direction="backward", folds=4, features=list(DISCRETE),
                              feature_kinds=DISCRETE, structure="tan")
    assert s.model.hyper.structure == "tan" and s.features
    refit = sqlnb.fit("train", label="y", con=con, features=s.features,
                      feature_kinds={k: DISCRETE[k] for k in s.features}, structure="tan")
    assert s.model.tree() == refit.tree()
    np.testing.assert_allclose(probabilities(s.model, "test", con), probabilities(refit, "test", con),
                               rtol=0, atol=1e-9)
