"""Issue 27, point 3: under the defaults ``sqlnb evaluate`` costs at most 1.3x ``sqlnb score``'s
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
