"""The exact one-vs-rest ROC AUC and average precision sums of ``evaluate`` on DuckDB,
from the ranked rows' scores sorted in numpy.

On DuckDB, :func:`sqlnb.workflows.evaluate.evaluate` reads the scored rows once, in one
statement whose result streams, as Arrow batches, the confusion cells and calibration bins
(a few rows) and per ranked row its class index ``k`` and its one-vs-rest scores
(:func:`sqlnb.workflows.evaluate.stream_query`). :class:`RankSums` keeps, per class
``c``, the scores of the rows of class ``c`` (``pos``) and of the others (``neg``), sorts
each and, per row of class ``c`` with score ``v``, counts by binary search::

    lt, le   rows of another class scored < v, ≤ v     (searchsorted left, right in neg)
    fge      N − lt                                    (another class, scored ≥ v)
    tps      P − #(pos < v)                            (class c, scored ≥ v, v's ties included)
    a_c      Σ (le + lt) − P·N  = Σ (fle − fge)         (fle = le: another class, scored ≤ v)
    q_c      Σ tps / (tps + fge)

the sums :func:`sqlnb.workflows.ranking.rank_figures` turns into ``AUC_c = (P·N + a_c) /
(2·P·N)`` and ``AP_c = q_c / P`` (the derivation is in :mod:`sqlnb.workflows.ranking`).
``a_c`` is an integer (exact); ``q_c`` a sum of P ratios, in numpy's pairwise order.

Why not in SQL: windows over the rows sorted by score (RANGE frames for the ties) cost
DuckDB 2–3x ``score``'s CPU time on 10M rows (a sort that spills under evaluate's small
memory limit, then segment trees per window), and a group per distinct score ~1.2 GB;
two float64 sorts and three binary searches per class cost numpy ~1.2 s per 10M rows
(benchmarks/README.md, "Default memory"). PostgreSQL and Spark keep the in-database shape.

Ties: numpy sorts and searches with one order (NaN last, equal to itself; −0.0 = 0.0), so
rows of equal score are peers as in the SQL windows and scikit-learn's ``roc_auc_score`` /
``average_precision_score``.

Two classes: only ``s1`` is streamed. ``s0 = −s1`` exactly (IEEE subtraction is
antisymmetric), so class 0's positives are class 1's negatives ranked in reverse: the pair
count of its AUC is class 1's (``a_0 = a_1``, with ``P_0·N_0 = P_1·N_1``) and its AP terms
take the counts ≤ instead of ≥.
"""

from __future__ import annotations

import tempfile

import numpy as np

#: Positives per binary-search step (bounds the int64 temporaries to a few MB each).
CHUNK = 1 << 20
#: Rows per Arrow batch of the streamed statement (~13 columns: a few MB a batch).
BATCH = 1 << 16


def streamed_classes(K: int) -> list[int]:
    """The classes whose score is streamed: class 1 for two classes (class 0's is its
    negation), every class otherwise."""
    return [1] if K == 2 else list(range(K))


class RankSums:
    """Collects the ranked rows' scores batch by batch and returns ``a<c>`` and ``q<c>``
    per class (module docstring); a context manager (it holds temporary files).

    Each batch is split at once into per-class positives and negatives, appended to two
    temporary files per streamed class (in ``directory``; None: the system's), so that
    while DuckDB streams, nothing grows here; then each class in turn is read back, sorted
    and counted: 8 bytes per ranked row of one class at a time. (Kept in memory as
    arrays, 10M rows' parts and their joined copy added ~180 MiB to the peak, beside
    DuckDB's.)
    """

    def __init__(self, K: int, directory: str | None = None):
        self.K = K
        self.files = {c: (tempfile.TemporaryFile(dir=directory), tempfile.TemporaryFile(dir=directory))
                      for c in streamed_classes(K)}

    def __enter__(self) -> "RankSums":
        return self

    def __exit__(self, *exc) -> None:
        for pos, neg in self.files.values():
            pos.close()
            neg.close()

    def add(self, k: np.ndarray, scores: dict[int, np.ndarray]) -> None:
        """One batch of ranked rows: ``k`` their class index, ``scores[c]`` their score_c."""
        for c, (pos, neg) in self.files.items():
            own = k == c
            np.ascontiguousarray(scores[c][own], dtype=np.float64).tofile(pos)
            np.ascontiguousarray(scores[c][~own], dtype=np.float64).tofile(neg)

    def sums(self) -> dict[str, float]:
        """``{"a<c>": …, "q<c>": …}`` for every class."""
        out: dict[str, float] = {}
        for c, files in self.files.items():
            pos, neg = (_sorted(f) for f in files)
            out[f"a{c}"], out[f"q{c}"] = _descending(pos, neg)
            if self.K == 2:  # class 0: rows of class 0 are neg, ranked by −s1
                out["a0"], out["q0"] = out[f"a{c}"], _ascending_q(neg, pos)
            del pos, neg
        return out


def _sorted(f) -> np.ndarray:
    """The doubles written to ``f``, sorted ascending."""
    f.flush()
    f.seek(0)
    values = np.fromfile(f, dtype=np.float64)
    values.sort()
    return values


def _descending(pos: np.ndarray, neg: np.ndarray) -> tuple[float, float]:
    """``(a, q)`` of the rows ``pos`` against ``neg`` (both sorted ascending), ranked by
    decreasing score."""
    P, N = len(pos), len(neg)
    pairs, q = 0, 0.0
    for i in range(0, P, CHUNK):
        v = pos[i:i + CHUNK]
        lt = np.searchsorted(neg, v, "left")
        pairs += int(lt.sum(dtype=np.int64)) + int(np.searchsorted(neg, v, "right").sum(dtype=np.int64))
        tps = P - np.searchsorted(pos, v, "left")
        q += float(np.sum(tps / (tps + (N - lt))))
    return float(pairs - P * N), q


def _ascending_q(pos: np.ndarray, neg: np.ndarray) -> float:
    """``q`` of the rows ``pos`` against ``neg`` (both sorted ascending), ranked by
    increasing score: per row, tps = #(pos ≤ v) and fge = #(neg ≤ v)."""
    q = 0.0
    for i in range(0, len(pos), CHUNK):
        v = pos[i:i + CHUNK]
        tps = np.searchsorted(pos, v, "right")
        q += float(np.sum(tps / (tps + np.searchsorted(neg, v, "right"))))
    return q


def read_stream(reader, K: int, directory: str | None = None, part: str = "part") -> tuple:
    """Split the Arrow batches of ``reader`` (of :func:`sqlnb.workflows.evaluate.stream_query`)
    into its grouped rows (``part`` not NULL: the confusion cells and calibration bins, an
    Arrow table) and the ranking sums of its ranked rows (``part`` NULL; ``k`` and ``s<c>``
    per :func:`streamed_classes`; their scores in temporary files in ``directory``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    grouped = []
    names = [f"s{c}" for c in streamed_classes(K)]
    with RankSums(K, directory) as sums:
        for batch in reader:
            marked = batch.column(part)
            if marked.null_count < len(batch):
                grouped.append(batch.filter(marked.is_valid()))
                batch = batch.filter(pc.is_null(marked))
            if len(batch):
                k = batch.column("k").to_numpy()
                sums.add(k, {c: batch.column(n).to_numpy() for c, n in zip(streamed_classes(K), names)})
        figures = sums.sums()
    return pa.Table.from_batches(grouped, schema=reader.schema), figures
