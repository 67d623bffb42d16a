"""Under the defaults ``sqlnb evaluate`` costs at most 1.3x ``sqlnb score``'s
time on 10M rows. The exact ROC AUC and average precision used to sort the rows in DuckDB with
windows whose RANGE frames took in the ties (2-3x score's CPU time at 10M rows); evaluate on
DuckDB now reads the scored rows in one streaming statement (no window, no sort, no aggregate)
and ranks the scores in numpy (sqlnb/workflows/ranksort.py). What is checked here is that shape
(no timed test: benchmarks/README.md, "Default memory", has the figures) and that the numpy
sums are scikit-learn's, ties, infinities and one-class data included.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn import metrics

import sqlnb
from sqlnb.engines.duckdb import DuckDBEngine
from sqlnb.workflows import ranksort
from sqlnb.workflows.evaluate import evaluate


def _statements(monkeypatch) -> list[str]:
    """Every SQL text evaluate sends to DuckDB (run or streamed), in order."""
    seen: list[str] = []
    execute, relation = DuckDBEngine.execute, DuckDBEngine.relation

    def traced_execute(self, tree, params=None):
        seen.append(sqlnb.sql.render(tree, self.dialect))
        return execute(self, tree, params)

    def traced_relation(self, tree):
        seen.append(sqlnb.sql.render(tree, self.dialect))
        return relation(self, tree)

    monkeypatch.setattr(DuckDBEngine, "execute", traced_execute)
    monkeypatch.setattr(DuckDBEngine, "relation", traced_relation)
    return seen


@pytest.mark.parametrize("K", [2, 3])
def test_evaluate_reads_the_rows_in_one_statement_without_windows_or_sorts(monkeypatch, K):
    """The one statement that reads the data has no window, ORDER BY or GROUP BY (33cf08b:
    RANGE-frame windows ordered by score), and the figures still equal scikit-learn's."""
    rng = np.random.default_rng(K)
    n = 2000
    k = rng.integers(0, K, n)
    table = pa.table({"x": rng.normal(k * 0.5, 1.0), "z": rng.normal(-k * 0.3, 1.0),
                      "y": [f"c{i}" for i in k]})
    con = duckdb.connect()
    con.register("data", table)
    model = sqlnb.fit("data", "y", con=con)
    seen = _statements(monkeypatch)
    ev = evaluate(model, "data", con)
    reads = [s for s in seen if '"data"' in s]
    assert len(reads) == 1, reads
    found = [w for w in ("OVER (", "ORDER BY", "GROUP BY", "RANGE BETWEEN") if w in reads[0].upper()]
    assert not found, f"the statement reading the rows has {found}"
    assert not [s for s in seen if "RANGE BETWEEN" in s.upper()], "a window with a RANGE frame ran"
    monkeypatch.undo()
    proba = model.score("data", con, outputs=("proba",)).to_arrow_table().to_pydict()
    P = np.array([proba[f"proba_c{i}"] for i in range(K)]).T
    for c in range(K):
        assert abs(ev.per_class[c].roc_auc - metrics.roc_auc_score(k == c, P[:, c])) <= 1e-12
        assert abs(ev.per_class[c].average_precision - metrics.average_precision_score(k == c, P[:, c])) <= 1e-12


def _ranksums(K: int, k: np.ndarray, scores: dict[int, np.ndarray], batch: int = 7) -> dict:
    from sqlnb.workflows.ranksort import RankSums

    with RankSums(K) as sums:
        for i in range(0, len(k), batch):  # batches cut across the ties
            sums.add(k[i:i + batch], {c: s[i:i + batch] for c, s in scores.items()})
        return sums.sums()


@pytest.mark.parametrize("K", [2, 3])
def test_numpy_rank_sums_equal_scikit_learn_with_ties_and_infinities(K):
    """AUC = (P·N + a) / (2·P·N) and AP = q / P from the streamed sums equal scikit-learn's,
    on scores with heavy ties, ±inf and -0.0 beside 0.0; two classes stream class 1's score only."""
    rng = np.random.default_rng(10 + K)
    n = 3001
    k = rng.integers(0, K, n)
    raw = {c: np.round(rng.normal((k == c) * 0.7, 1.0), 1) for c in range(K)}
    for c in range(K):
        raw[c][rng.random(n) < 0.02] = np.inf
        raw[c][rng.random(n) < 0.02] = -np.inf
        raw[c][raw[c] == 0.0] = np.where(rng.random((raw[c] == 0.0).sum()) < 0.5, -0.0, 0.0)
    if K == 2:
        raw[0] = -raw[1]
    streamed = {1: raw[1]} if K == 2 else raw
    sums = _ranksums(K, k, streamed)
    for c in range(K):
        truth = k == c
        Pc, Nc = truth.sum(), (~truth).sum()
        auc = (Pc * Nc + sums[f"a{c}"]) / (2.0 * Pc * Nc)
        finite = np.where(np.isinf(raw[c]), np.sign(raw[c]) * 1e300, raw[c])  # sklearn refuses inf
        assert abs(auc - metrics.roc_auc_score(truth, finite)) <= 1e-12
        assert abs(sums[f"q{c}"] / Pc - metrics.average_precision_score(truth, finite)) <= 1e-12


def test_numpy_rank_sums_of_one_class_and_no_rows():
    """No negatives (one class in the rows) and no rows at all: sums of 0, no error (the
    figures are then undefined, as rank_figures says from P and N)."""
    k = np.zeros(5, dtype=np.int32)
    got = _ranksums(3, k, {c: np.arange(5.0) for c in range(3)})
    assert got["a1"] == 0.0 and got["q1"] == 0.0
    assert got["q0"] == 5.0  # every positive above no negative: precision 1 at each
    empty = _ranksums(2, np.zeros(0, dtype=np.int32), {1: np.zeros(0)})
    assert empty == {"a1": 0.0, "q1": 0.0, "a0": 0.0, "q0": 0.0}


# --------------------------------------------------------------------------------------------
# The exact ranking searches the negatives' right side only where scores tie (``evaluate`` of a
# 3-class model cost 1.41x ``score``'s user CPU at 10M rows with a search per positive row).
#
# The excess is the exact ranking in numpy (:mod:`sqlnb.workflows.ranksort`): per class two
# sorts and, per positive row, three binary searches. The search for the right insertion
# point among the negatives (``le``) is needed only where a negative ties the positive's
# score; it is now made for those rows alone (:func:`sqlnb.workflows.ranksort._ties`),
# ~0.12 s of CPU per class and 10M rows. Checked here: the sums against a brute-force count
# (with and without ties, empty sides), and that the right-side search now sees only the
# tied values.
# --------------------------------------------------------------------------------------------


def brute(pos: np.ndarray, neg: np.ndarray) -> tuple[float, float]:
    """``a`` and ``q`` of :func:`ranksort._descending` by direct counting."""
    P, N = len(pos), len(neg)
    le = np.array([(neg <= v).sum() for v in pos], dtype=np.int64)
    lt = np.array([(neg < v).sum() for v in pos], dtype=np.int64)
    tps = np.array([(pos >= v).sum() for v in pos], dtype=np.int64)
    return float(int((le + lt).sum()) - P * N), float(np.sum(tps / (tps + (N - lt))))


@pytest.mark.parametrize("seed,kind", [(0, "distinct"), (1, "ties"), (2, "all tied"), (3, "no negatives"),
                                       (4, "inf")])
def test_descending_sums_equal_brute_force(seed, kind):
    rng = np.random.default_rng(seed)
    if kind == "distinct":
        pos, neg = rng.normal(size=300), rng.normal(size=500)
    elif kind == "ties":
        pos, neg = rng.integers(0, 12, 300).astype(float), rng.integers(0, 12, 500).astype(float)
    elif kind == "all tied":
        pos, neg = np.full(40, 0.5), np.full(60, 0.5)
    elif kind == "no negatives":
        pos, neg = rng.normal(size=50), np.empty(0)
    else:
        pos = np.concatenate([rng.normal(size=50), [np.inf, np.inf]])
        neg = np.concatenate([rng.normal(size=70), [np.inf]])
    pos, neg = np.sort(pos), np.sort(neg)
    a, q = ranksort._descending(pos, neg)
    want_a, want_q = brute(pos, neg)
    assert a == want_a
    assert q == pytest.approx(want_q, rel=1e-14, abs=0)


def test_right_search_only_for_tied_scores(monkeypatch):
    rng = np.random.default_rng(7)
    pos = np.sort(rng.random(20_000))
    neg = np.sort(np.concatenate([rng.random(30_000), pos[:5]]))  # five positives tie a negative
    searched = {"left": 0, "right": 0}
    real = np.searchsorted

    def counting(a, v, side="left", *args, **kwargs):
        searched[side] += np.size(v)
        return real(a, v, side, *args, **kwargs)

    monkeypatch.setattr(ranksort.np, "searchsorted", counting)
    a, q = ranksort._descending(pos, neg)
    monkeypatch.setattr(ranksort.np, "searchsorted", real)
    assert (a, q) == ranksort._descending(pos, neg)
    assert searched["right"] == 5, searched
    want_a, _ = brute(pos[:2000], neg)  # a spot check on a part (brute force is quadratic)
    assert ranksort._descending(pos[:2000], neg)[0] == want_a
