"""AODE's DuckDB scoring SELECT since s41: each class's ratio tables (every super-parent's,
one list) are prelude columns written once, and each of the K·F(F−1) reads is
``list_extract(table_c, row_i + slot_j)`` of prelude columns
(:func:`sqlnb.models.naive_bayes.aode.prelude`). On 6a739ab every read held a literal of
its own (i, j) table: spambase's 57 MDL-binned columns made a 2.4 MB SELECT of 6,840
``string_split`` literals, which DuckDB bound and folded one by one.

The scores are 6a739ab's bit for bit: its ``aode.py`` is read from git (``git show``) and
put in place of this checkout's DuckDB form (prelude, reads, categorical naive terms), so
the same model scores the same rows both ways. Rows keep their count and order, with a
lookup join (a categorical column past ``INLINE_MAX`` values) in the SELECT too."""

from __future__ import annotations

import re
from dataclasses import replace

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb import sql
from sqlnb.models.naive_bayes import aode
from support.history import module_at
from support.shared_data import require_shared_data
from test_aode import aode_table

START = "6a739ab"


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    """6a739ab's aode.py as a module of its own."""
    with module_at(START, "sqlnb/models/naive_bayes/aode.py", tmp_path_factory.mktemp("before")) as module:
        yield module


def as_before(monkeypatch, old) -> None:
    """This checkout's DuckDB AODE form replaced by 6a739ab's: its padded positions as the
    prelude's columns (named as there), its reads of one literal per table, its naive terms."""
    prefix = "sqlnb_aode_position"

    def at(net):
        return {f.name: sql.col(f"{prefix}{i}", "src") for i, f in enumerate(net.features)}

    monkeypatch.setattr(aode, "prelude", lambda net, *args: [
        (f"{prefix}{i}", e) for i, e in enumerate(old.padded_positions(net, *args).values())])
    monkeypatch.setattr(aode, "padded_terms", lambda net: old.padded_terms(net, at(net)))
    monkeypatch.setattr(aode, "padded_naive", lambda net, name, log_prob: old.padded_naive(log_prob, at(net)[name]))


def scores(model, source: str, con, outputs=("jll", "proba", "prediction")) -> list[tuple]:
    return model.score(source, con=con, outputs=outputs, keep=["rid"]).fetchall()


def assert_bit_identical(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want) and [r[0] for r in got] == [r[0] for r in want]
    g, w = np.array([r[1:-1] for r in got], dtype=float), np.array([r[1:-1] for r in want], dtype=float)
    assert np.array_equal(g.view(np.int64), w.view(np.int64)), np.nanmax(np.abs(g - w))
    assert [r[-1] for r in got] == [r[-1] for r in want]


@pytest.fixture(scope="module")
def small():
    """test_aode.py's rows (categorical, Bernoulli, rare values, Gaussian, NULLs, unseen
    values) with a binned column and a categorical one of 150 values (a lookup join)."""
    con = duckdb.connect()
    tables = []
    for n, seed, unseen in ((600, 1, False), (250, 2, True)):
        t = aode_table(n, seed, unseen)
        rng = np.random.default_rng(seed + 10)
        t = t.append_column("x", pa.array(rng.normal(size=n), mask=rng.random(n) < 0.1))
        t = t.append_column("big", pa.array([f"v{v}" for v in rng.integers(0, 150, n)], pa.string()))
        tables.append(t)
    con.register("train", tables[0])
    con.register("test", tables[1])
    order = np.random.default_rng(4).permutation(tables[1].num_rows)
    con.register("shuffled", tables[1].take(order))
    kinds = {"a": "categorical", "b": "categorical", "r": "categorical", "flag": "bernoulli", "x": "binned",
             "big": "categorical"}
    return con, kinds, tables[1]["rid"].take(order).to_pylist()


@pytest.mark.parametrize("params", [{}, {"aode_min_count": 1e9}, {"estimator": "mle"}, {"shift": (3.5, -2.0, 1.0)}])
def test_scores_are_6a739abs_bit_for_bit(small, before, monkeypatch, params):
    """Every branch of the term: shift 0 with no −inf cell (the CASE-free form), no
    super-parent left, −inf cells (MLE), a non-zero shift (set on the derived model)."""
    con, kinds, _ = small
    params = dict(params)
    shift = params.pop("shift", None)
    model = sqlnb.fit("train", label="y", con=con, feature_kinds={**kinds, "g": "gaussian"}, features=[*kinds, "g"],
                      bins="quantile:4",
                      structure="aode", **params)
    if shift is not None:
        model._aode = replace(model._aode, shift=np.array(shift))
    assert {f.name for f in model._aode.features} == {"a", "b", "r", "flag", "x"}
    assert "JOIN" in model.to_sql("duckdb", source="test", con=con, pretty=False).upper()  # big's lookup
    got = scores(model, "test", con)
    as_before(monkeypatch, before)
    want = scores(model, "test", con)
    monkeypatch.undo()
    assert_bit_identical(got, want)
    assert [r[0] for r in got] == list(range(250))


def test_rows_keep_count_and_order(small):
    con, kinds, order = small
    model = sqlnb.fit("train", label="y", con=con, feature_kinds=kinds, features=list(kinds), bins="quantile:4",
                      structure="aode")
    assert [r[0] for r in scores(model, "shuffled", con, ("proba",))] == order


@pytest.fixture(scope="module")
def spambase():
    """spambase's 57 numeric columns (MDL bins, all of them AODE features), fitted on every
    row; the model scores every fifth row."""
    path = require_shared_data("spambase") / "spambase" / "spambase.data"
    con = duckdb.connect()
    cols = {f"x{i:02d}": "DOUBLE" for i in range(57)} | {"spam": "BIGINT"}
    con.execute(f"CREATE TABLE raw AS SELECT row_number() OVER () - 1 AS rid, * FROM read_csv("
                f"'{path}', header = false, columns = {cols})")
    con.execute("CREATE VIEW train AS SELECT * EXCLUDE (rid) FROM raw")
    con.execute("CREATE VIEW test AS SELECT * EXCLUDE (spam) FROM raw WHERE rid % 5 = 0")
    model = sqlnb.fit("train", label="spam", con=con, bins="mdl", structure="aode")
    assert len(model._aode.features) == 57
    return con, model


def test_spambase_select_is_smaller_and_writes_each_table_once(spambase, monkeypatch):
    """6a739ab: 2.43 MB and 6,840 ``string_split`` literals (one per read); in the form of
    one read per pair (``aode.READ_MAX`` set past 57) 1.81 MB, of which 1.17 MB are the
    two classes' tables (each cell's shortest exact text), and the two lists alone, with
    the eligibility list and each binned column's naive row per class (its naive term read
    at its slot). By default, past READ_MAX features, a super-parent's sum is one
    ``list_sum`` per class: the SELECT without its literals is under a seventh of that."""
    con, model = spambase
    monkeypatch.setattr(aode, "READ_MAX", 10**6)
    text = model.to_sql("duckdb", source="test", con=con, pretty=False)
    assert len(text) < 2_000_000, len(text)
    assert len(re.findall(r"STRING_SPLIT\(", text, flags=re.I)) == len(model.classes) + 1 + 57 * 2
    reads = len(re.findall(r"LIST_EXTRACT\(", text, flags=re.I))
    # per class every (i, j), ok_i in |S| (written 3 times) and part i, and each naive term
    assert reads == 2 * 57 * 56 + 57 * 4 * 2 + 57 * 2
    assert len(re.sub(r"'[^']*'", "''", text)) < 700_000  # the SELECT without its literals (6a739ab: 0.92 MB)
    monkeypatch.undo()
    listed = model.to_sql("duckdb", source="test", con=con, pretty=False)
    assert len(listed) < 2_000_000, len(listed)
    assert len(re.findall(r"LIST_SUM\(", listed, flags=re.I)) == 2 * 57
    assert len(re.sub(r"'[^']*'", "''", listed)) < 100_000  # 77 kB when written


def test_spambase_scores_are_6a739abs_bit_for_bit(spambase, before, monkeypatch):
    """On the first 28 columns: 6a739ab's form takes ~4 s of CPU to plan at all 57 (whose
    4,601 rows' jll and proba were compared bit for bit when s41 was measured). The form of
    one read per pair (``aode.READ_MAX`` set past 28) bit for bit; the default one, a
    ``list_sum`` per super-parent (summed left to right, not as a balanced tree), within
    1e-12 and with the same predictions."""
    con, _ = spambase
    model = sqlnb.fit("train", label="spam", con=con, bins="mdl", structure="aode",
                      features=[f"x{i:02d}" for i in range(28)])
    assert len(model._aode.features) == 28
    listed = scores(model, "test", con)
    monkeypatch.setattr(aode, "READ_MAX", 10**6)
    got = scores(model, "test", con)
    as_before(monkeypatch, before)
    want = scores(model, "test", con)
    monkeypatch.undo()
    assert_bit_identical(got, want)
    assert [r[0] for r in got] == list(range(0, 4601, 5))
    assert [r[0] for r in listed] == [r[0] for r in want] and [r[-1] for r in listed] == [r[-1] for r in want]
    np.testing.assert_allclose(np.array([r[1:-1] for r in listed], dtype=float),
                               np.array([r[1:-1] for r in want], dtype=float), rtol=0, atol=1e-12)
