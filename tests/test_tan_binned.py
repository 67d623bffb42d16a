"""Binned columns (``bins="mdl"``) are tree features of tree-augmented naive Bayes, by their
bin numbers: the model equals a tree-augmented fit on the same rows with each numeric
column replaced by its bin number (computed here in numpy from the model's cut points)
as a categorical column, within 1e-9, tree included. Friedman, Geiger & Goldszmidt (1997)
discretised continuous attributes the same way (Fayyad–Irani MDL) before building the tree."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

import sqlnb
from support.structured import CLASSES, probabilities, tan_table

KINDS = {"a": "categorical", "e": "categorical", "flag": "bernoulli"}


def with_numbers(table: pa.Table, seed: int) -> pa.Table:
    """Two numeric columns: ``g`` (from tan_table) and ``h``, which follows ``g``."""
    rng = np.random.default_rng(seed)
    g = np.asarray(table.column("g").to_pylist(), dtype=object)
    h = [None if v is None or rng.random() < 0.05 else v + rng.normal(0, 0.5) for v in g]
    return table.append_column("h", pa.array(h, pa.float64()))


def as_bin_numbers(table: pa.Table, model) -> pa.Table:
    """``g`` and ``h`` replaced by their bins: bin b holds e_b <= x < e_{b+1}."""
    out = table
    for f in model.features:
        if f.kind == "binned":
            x = table.column(f.name).to_pylist()
            b = [None if v is None else int(np.searchsorted(np.asarray(f.edges), v, side="right")) for v in x]
            out = out.set_column(out.schema.get_field_index(f.name), f.name, pa.array(b, pa.int64()))
    return out


def test_binned_columns_join_the_tree_as_their_bin_numbers(tmp_path):
    train, test = with_numbers(tan_table(1500, 3), 4), with_numbers(tan_table(400, 5), 6)
    con = duckdb.connect()
    con.register("train", train)
    con.register("test", test)
    features = [*KINDS, "g", "h"]
    model = sqlnb.fit("train", label="y", con=con, features=features, feature_kinds=KINDS, bins="mdl",
                      structure="tan")
    assert [f.kind for f in model.features if f.name in ("g", "h")] == ["binned", "binned"]
    assert all(len(f.edges) >= 1 for f in model.features if f.kind == "binned")
    tree = model.tree()
    assert {"g", "h"} <= set(tree) | set(tree.values())  # both are in the tree
    con.register("train_bins", as_bin_numbers(train, model))
    con.register("test_bins", as_bin_numbers(test, model))
    oracle = sqlnb.fit("train_bins", label="y", con=con, features=features,
                       feature_kinds={**KINDS, "g": "categorical", "h": "categorical"}, structure="tan")
    assert model.tree() == oracle.tree()
    got, want = probabilities(model, "test", con), probabilities(oracle, "test_bins", con)
    assert got.shape == (400, len(CLASSES))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    # the same after a save / load round trip (the pair counts are stored by bin number)
    model.save(str(tmp_path / "m.duckdb"), "tan")
    loaded = sqlnb.load(str(tmp_path / "m.duckdb"), "tan")
    assert loaded.tree() == model.tree()
    np.testing.assert_allclose(probabilities(loaded, "test", con), want, rtol=0, atol=1e-9)
