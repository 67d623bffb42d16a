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
        pairs += 2 * int(lt.sum(dtype=np.int64)) + _ties(neg, v, lt)
        tps = P - np.searchsorted(pos, v, "left")
        q += float(np.sum(tps / (tps + (N - lt))))
    return float(pairs - P * N), q


def _ties(neg: np.ndarray, v: np.ndarray, lt: np.ndarray) -> int:
    """``Σ (le − lt)``: how many rows of ``neg`` equal each of ``v`` (``lt`` its left
    insertion points in ``neg``, sorted ascending), summed. A value of ``v`` has a tie
    only where ``neg[lt]`` equals it; the right insertion points are searched for those
    alone (the search for every row was a third of the ranking's time, issue 27: scores
    of distinct rows rarely tie)."""
    if not len(neg):
        return 0
    tied = neg[np.minimum(lt, len(neg) - 1)] == v
    if not tied.any():
        return 0
    v, lt = v[tied], lt[tied]
    return int((np.searchsorted(neg, v, "right") - lt).sum(dtype=np.int64))


def _ascending_q(pos: np.ndarray, neg: np.ndarray) -> float:
    """``q`` of the rows ``pos`` against ``neg`` (both sorted ascending), ranked by
    increasing score: per row, tps = #(pos ≤ v) and fge = #(neg ≤ v)."""
    q = 0.0
    for i in range(0, len(pos), CHUNK):
        v = pos[i:i + CHUNK]
        tps = np.searchsorted(pos, v, "right")
        q += float(np.sum(tps / (tps + np.searchsorted(neg, v, "right"))))
    return q


def read_stream(reader, K: int, directory: str | None = None) -> tuple:
    """The confusion cells and calibration bins (an Arrow table, as GROUPING SETS ((k, y,
    p), (bin)) would give them: ``part``, ``k``, ``y``, ``p``, ``bin``, ``n`` rows, ``m``
    with probabilities, the sums ``loss``, ``brier``, ``conf``, ``hits``) and the ranking
    sums, from the Arrow batches of ``reader`` (:func:`sqlnb.workflows.evaluate.stream_query`;
    the scores wait in temporary files in ``directory``). Each batch is grouped by pyarrow
    as it comes, and the batches' groups summed at the end."""
    import pyarrow as pa

    keys = {CELL_KEYS: [], ("bin",): []}
    first, aggregates = f"s{streamed_classes(K)[0]}", _aggregates()
    with RankSums(K, directory) as sums:
        for batch in reader:
            table = pa.Table.from_batches([batch])
            for by, parts in keys.items():
                parts.append(table.group_by(list(by), use_threads=False).aggregate(aggregates))
            ranked = batch.column(first)
            if ranked.null_count:
                batch = batch.filter(ranked.is_valid())
            if len(batch):
                sums.add(batch.column("k").to_numpy(), {c: batch.column(f"s{c}").to_numpy()
                                                        for c in streamed_classes(K)})
        figures = sums.sums()
    cells, bins = (_regrouped(parts, list(by), reader.schema) for by, parts in keys.items())
    return pa.concat_tables([cells, bins]), figures


#: The keys of the confusion cells.
CELL_KEYS = ("k", "y", "p")
#: A batch's aggregates per group, named by pyarrow ``<column>_<function>``: n (every row,
#: counted on ``k``), m (rows with a log loss term), the sums; then summed over the batches.
AGGREGATES = (("k", "count"), ("loss", "count"), ("loss", "sum"), ("brier", "sum"), ("conf", "sum"), ("hit", "sum"))


def _aggregates() -> list:
    import pyarrow.compute as pc
    return [(c, f, pc.CountOptions(mode="all")) if (c, f) == ("k", "count") else (c, f) for c, f in AGGREGATES]


def _regrouped(parts: list, by: list[str], schema) -> "pa.Table":
    """The groups of every batch (``parts``) summed into one row per key, in the columns of
    :func:`read_stream` (``part`` 0 for a cell, 1 for a bin; the other keys NULL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if parts:
        grouped = pa.concat_tables(parts).group_by(by, use_threads=False).aggregate(
            [(f"{c}_{f}", "sum") for c, f in AGGREGATES])
    else:
        grouped = pa.table({**{k: pa.array([], schema.field(k).type) for k in by},
                            **{f"{c}_{f}_sum": pa.array([], pa.float64()) for c, f in AGGREGATES}})
    n = len(grouped)
    column = {name: grouped.column(f"{c}_{f}_sum") for name, (c, f) in
              zip(("n", "m", "loss", "brier", "conf", "hits"), AGGREGATES)}
    out = {"part": pa.array([0 if "k" in by else 1] * n, pa.int32())}
    for key in ("k", "y", "p", "bin"):
        out[key] = grouped.column(key) if key in by else pa.nulls(n, schema.field(key).type)
    out |= {"n": pc.cast(column["n"], pa.int64()), "m": pc.cast(column["m"], pa.int64())}
    out |= {name: pc.cast(column[name], pa.float64()) for name in ("loss", "brier", "conf", "hits")}
    return pa.table(out)
