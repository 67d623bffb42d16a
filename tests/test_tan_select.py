"""Tree-augmented naive Bayes restricted to a subset of its features: ``NaiveBayes.select``
keeps only the pair counts among the kept tree features, so the subset's model equals a
tree-augmented fit on those features alone (the tree is re-derived among them), and
wrapper selection (``sqlnb.select_features(..., structure="tan")``) runs on it."""

from __future__ import annotations

import numpy as np
import pytest

import sqlnb
from test_tan import DISCRETE, data, probabilities  # noqa: F401  (data is a fixture)


@pytest.mark.parametrize("subset", [["a", "e", "flag"], ["b", "noise"]])
def test_select_equals_a_fit_on_the_subset(data, subset):  # noqa: F811
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


def test_wrapper_selection_of_a_tree(data):  # noqa: F811
    con, _, _ = data
    s = sqlnb.select_features("train", "y", con=con, direction="backward", folds=4, features=list(DISCRETE),
                              feature_kinds=DISCRETE, structure="tan")
    assert s.model.hyper.structure == "tan" and s.features
    refit = sqlnb.fit("train", label="y", con=con, features=s.features,
                      feature_kinds={k: DISCRETE[k] for k in s.features}, structure="tan")
    assert s.model.tree() == refit.tree()
    np.testing.assert_allclose(probabilities(s.model, "test", con), probabilities(refit, "test", con),
                               rtol=0, atol=1e-9)
