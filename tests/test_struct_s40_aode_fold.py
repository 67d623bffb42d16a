"""AODE's two term builders (DuckDB's padded form, :func:`aode.padded_terms`, and the
portable one, :func:`aode.terms`) share one skeleton since s40 (:func:`aode._averaged`).
The fold changed no SQL: the portable form renders byte for byte what 1de9335's ``aode.py``
renders for the same derived model, in every branch of the skeleton (shift 0 with no −inf
cell: DuckDB's CASE-free form; a −inf cell, MLE; a non-zero shift, set on the derived model).
(DuckDB's padded form was pinned here too until s41, which reads its tables from the
prelude: tests/test_aode_speed_s41.py checks its scores bit for bit against 6a739ab's.)

The expected text is computed, not stored: 1de9335's ``aode.py`` is read from git
(``git show``) and run against this checkout's package (the two modules build from the
same :mod:`sqlnb.sql` helpers, so the comparison pins aode.py's own tree-building only).
The portable form renders to ~40–70 kB here, too much to keep in a test file."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.models.naive_bayes import aode
from support.history import module_at

START = "1de9335010b9f9ae1fc660d456a64ff8ff8ad982"


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    """1de9335's aode.py as a module of its own."""
    with module_at(START, "sqlnb/models/naive_bayes/aode.py", tmp_path_factory.mktemp("before")) as module:
        yield module


def table() -> pa.Table:
    """A categorical, a Bernoulli and a (quantile-)binned column, two classes."""
    rng = np.random.default_rng(3)
    n = 40
    y = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < 0.7, y, rng.integers(0, 3, n))
    return pa.table({"a": pa.array([f"a{v}" for v in a]), "flag": pa.array(rng.random(n) < 0.3 + 0.4 * y),
                     "x": pa.array(rng.normal(y, 1.0)), "y": pa.array([f"k{v}" for v in y])})


def rendered(module, model, net) -> str:
    """The portable form rendered for PostgreSQL."""
    portable = module.terms(net, model._scoring_features(None), model.stats, "postgres", None)
    return sql.render(exp.select(*portable), "postgres")


@pytest.mark.parametrize("estimator", ["posterior-mean", "mle"])
@pytest.mark.parametrize("shift", [None, (3.5, -2.0)])
def test_both_forms_render_as_before_the_fold(before, estimator, shift):
    con = duckdb.connect()
    con.register("t", table())
    model = sqlnb.fit("t", label="y", con=con, structure="aode", bins="quantile:3", estimator=estimator)
    net = model._aode
    assert net.log_shifted == (estimator == "mle")  # both branches of the −inf guard are covered
    if shift is not None:
        net = replace(net, shift=np.array(shift))
    got, want = rendered(aode, model, net), rendered(before, model, net)
    if got != want:  # the first difference, not pytest's diff of ~50 kB lines
        at = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
        pytest.fail(f"portable (PostgreSQL) SQL differs from {START[:7]}'s at character {at}: "
                    f"{got[max(0, at - 60):at + 60]!r} against {want[max(0, at - 60):at + 60]!r}")
    # the branches are what the parameters say: DuckDB's CASE-free form only at shift 0, no −inf
    padded = sql.render(exp.select(*aode.padded_terms(net)), "duckdb")
    assert ("CASE" in padded) == (shift is not None or estimator == "mle")
