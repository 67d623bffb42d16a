"""The packed-rows paths of the estimators (sqlnb/estimators/packed.py), pinned bit for bit.

The SQL every query shape renders and the probabilities every packed estimator gives on
digits are pinned, bit for bit, to digests taken at commit 1de9335 (before the shared part
moved into ``packed``, with ``sqlnb.estimators.counts`` in its place) and again after the
move: equal. The count and Gaussian paths share their plumbing through public names only.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest

from sqlnb import estimators as est
from sqlnb.estimators import counts, moments, packed
from support.estimators import digits  # noqa: F401 (a fixture)

ESTIMATORS = Path(est.__file__).parent

#: sha256 (first 16 hex digits) of every shape's SQL text, one builder at a time.
SQL = {
    "counts fit": "bdc9b0b9c8edecbb",
    "counts score": "3f4b4364c0fd7a6f",
    "moments fit": "0749c8be87f32255",
    "moments m2": "a5d6f3dddfb470c0",
    "moments score": "edc27e9d990f994e",
}
#: sha256 (first 16 hex digits) of predict_proba's and predict_log_proba's bytes on
#: digits (:func:`proba_bytes`: the four query forms, weights, int32 X).
PROBA = {
    "gaussian": "2b89bcf1599fab53",
    "gaussian var_smoothing": "cb6b5893bcfa9a5e",
    "multinomial": "6918efd192b46259",
    "multinomial uniform": "da4ef5621e26e60d",
    "complement": "702d30b1df59fc23",
    "complement norm": "19e60ba09677937a",
    "bernoulli": "44dc6ff2f06cab40",
    "bernoulli binarize": "9711b91a1a1cfa7b",
}
MAKERS = {
    "gaussian": lambda: est.GaussianNB(),
    "gaussian var_smoothing": lambda: est.GaussianNB(var_smoothing=1e-6),
    "multinomial": lambda: est.MultinomialNB(),
    "multinomial uniform": lambda: est.MultinomialNB(alpha=0.3, class_prior="uniform"),
    "complement": lambda: est.ComplementNB(),
    "complement norm": lambda: est.ComplementNB(norm=True, alpha=2.0),
    "bernoulli": lambda: est.BernoulliNB(),
    "bernoulli binarize": lambda: est.BernoulliNB(binarize=7.5, alpha=0.5),
}


def _digest(parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def sql_texts(builder: str) -> list[str]:
    """Every shape's text of one SQL builder: widths 3 and 64, float and integer rows,
    weighted or not, each form (long, listed), Bernoulli threshold or none."""
    if builder == "counts fit":
        return [counts._fit_text(w, vt, "y", weight, long, t) for w, vt, weight, long, t in
                itertools.product((3, 64), ("DOUBLE", "BIGINT"), (None, "w"), (False, True), (None, 2.5))]
    if builder == "counts score":
        return [counts._score_text(w, k, vt, prior, out, listed, t) for w, k, vt, prior, out, listed, t in
                itertools.product((3, 64), (2, 10), ("DOUBLE", "INTEGER"), (False, True), ("proba", "log_proba"),
                                  (False, True), (None, 0.0))]
    shapes = list(itertools.product((3, 64), ("DOUBLE", "BIGINT")))
    if builder == "moments fit":
        return [moments._shifted_text(w, vt, "y") for w, vt in shapes]
    if builder == "moments m2":
        return [moments._second_text(w, vt, "y", lt, classes) for w, vt in shapes
                for lt, classes in (("VARCHAR", ["a", "b'c"]), ("BIGINT", [0, 1, 2]))]
    return [moments._score_text(w, k, vt, out) for w, vt in shapes for k in (2, 10) for out in ("proba", "log_proba")]


@contextlib.contextmanager
def _forms(long: bool, listed: bool):
    """The long (or per-column) fit and the listed (or per-class) scores, whatever the size."""
    saved = packed.LONG_VALUES, packed.LISTED_ROWS
    packed.LONG_VALUES, packed.LISTED_ROWS = (10**12 if long else 0), (10**12 if listed else 0)
    try:
        yield
    finally:
        packed.LONG_VALUES, packed.LISTED_ROWS = saved


def proba_bytes(name: str, X: np.ndarray, y: np.ndarray) -> list[bytes]:
    """predict_proba and predict_log_proba of ``MAKERS[name]``, as bytes: count families in
    each of the four query forms, and weighted and on int32 X in digits' own form (long,
    listed); Gaussian (one form: the listed rows, past which it takes the general path)
    on float and int32 X."""
    if name.startswith("gaussian"):
        cases = [(True, True, None, X), (True, True, None, X.astype(np.int32))]
    else:
        cases = [(long, listed, None, X) for long, listed in itertools.product((False, True), repeat=2)]
        cases += [(True, True, np.random.default_rng(1).random(len(y)), X), (True, True, None, X.astype(np.int32))]
    out = []
    for long, listed, w, Xin in cases:
        with _forms(long, listed):
            m = MAKERS[name]().fit(Xin, y, sample_weight=w)
            out += [m.predict_proba(Xin).tobytes(), m.predict_log_proba(Xin).tobytes()]
    return out


@pytest.mark.parametrize("builder", list(SQL))
def test_every_shape_renders_the_sql_it_rendered_before(builder):
    assert _digest(sql_texts(builder)) == SQL[builder]


@pytest.mark.parametrize("name", list(PROBA))
def test_the_probabilities_are_bit_identical_to_before(digits, name):  # noqa: F811
    X, y = digits
    assert _digest(proba_bytes(name, X, y)) == PROBA[name]


def _private_uses(path: Path) -> list[str]:
    """``module._name`` where ``module`` is a sibling imported by ``path``."""
    tree = ast.parse(path.read_text())
    siblings = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                and n.module == "sqlnb.estimators" for a in n.names}
    return [f"{path.name}:{n.lineno} {n.value.id}.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in siblings
            and n.attr.startswith("_") and not n.attr.startswith("__")]


def test_the_estimator_modules_share_only_public_names():
    """moments.py read eight of counts.py's private helpers; they are packed.py's public names now."""
    assert [u for p in sorted(ESTIMATORS.glob("*.py")) for u in _private_uses(p)] == []
    assert "counts" not in {a.name for n in ast.walk(ast.parse((ESTIMATORS / "moments.py").read_text()))
                            if isinstance(n, ast.ImportFrom) for a in n.names}


def test_every_function_of_packed_says_what_it_does_in_numpydoc():
    tree = ast.parse((ESTIMATORS / "packed.py").read_text())
    public = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")]
    assert {n.name for n in public} >= {"plain", "plain_naive_bayes", "registered_rows", "column_types", "values",
                                        "source", "grouped_text", "rendered", "run_scores", "matrix", "fit_report"}
    for n in public:
        doc = ast.get_docstring(n) or ""
        assert "Parameters\n----------" in doc, n.name
