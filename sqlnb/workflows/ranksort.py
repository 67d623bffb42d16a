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

from sqlnb.engines.duckdb import stream_errors
from sqlnb.store import arrow

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
        tps = P - _firsts(pos, v, i)
        q += float(np.sum(tps / (tps + (N - lt))))
    return float(pairs - P * N), q


def _firsts(pos: np.ndarray, v: np.ndarray, i: int) -> np.ndarray:
    """``np.searchsorted(pos, v, "left")`` for ``v = pos[i:i + len(v)]`` (``pos`` sorted
    ascending): each value's first position among its equals, from the runs of equal
    values in one pass (a binary search per row cost ~0.13 s per 3.3M rows); NaN, sorted
    last, equals NaN as in the search."""
    if not len(v):
        return np.zeros(0, dtype=np.int64)
    new = np.empty(len(v), dtype=bool)
    new[0] = True
    np.not_equal(v[1:], v[:-1], out=new[1:])
    nan = np.isnan(v)
    new[1:] &= ~(nan[1:] & nan[:-1])
    at = np.where(new, np.arange(i, i + len(v), dtype=np.int64), 0)
    at[0] = np.searchsorted(pos, v[0], "left")  # its run may start in the chunk before
    return np.maximum.accumulate(at)


def _ties(neg: np.ndarray, v: np.ndarray, lt: np.ndarray) -> int:
    """``Σ (le − lt)``: how many rows of ``neg`` equal each of ``v`` (``lt`` its left
    insertion points in ``neg``, sorted ascending), summed. A value of ``v`` has a tie
    only where ``neg[lt]`` equals it; the right insertion points are searched for those
    alone (the search for every row was a third of the ranking's time; scores
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
    the scores wait in temporary files in ``directory``). Each batch is grouped in numpy as
    it comes (:class:`Groups`), the batches' groups summed at the end."""
    import pyarrow.compute as pc

    cells, bins = Groups(CELL_KEYS), Groups(("bin",))
    first = f"s{streamed_classes(K)[0]}"
    # Out of memory past the first batch comes as pyarrow's OSError: raised as before it.
    with RankSums(K, directory) as sums, stream_errors():
        for batch in reader:
            terms = _terms(batch)
            cells.add(batch, terms)
            bins.add(batch, terms)
            ranked = batch.column(first)
            if ranked.null_count:
                batch = batch.filter(pc.is_valid(ranked))
            if len(batch):
                sums.add(arrow.numbers(batch.column("k")), {c: arrow.numbers(batch.column(f"s{c}"))
                                                            for c in streamed_classes(K)})
        figures = sums.sums()
    import pyarrow as pa
    return pa.concat_tables([cells.table(reader.schema, 0), bins.table(reader.schema, 1)]), figures


#: The keys of the confusion cells.
CELL_KEYS = ("k", "y", "p")
#: The sums of a group, as (column read, column returned): a row's term is added where it is
#: not NULL; a group without any such row gets NULL (as SQL's SUM).
SUMS = (("loss", "loss"), ("brier", "brier"), ("conf", "conf"), ("hit", "hits"))


class Groups:
    """Rows and sums per distinct key over the batches of :func:`read_stream`: ``n`` (every
    row), ``m`` (rows with a log loss term) and :data:`SUMS`, the groups in order of first
    appearance, as pyarrow's ``group_by(...).aggregate`` of each batch, regrouped, gave them
    (the same figures: each sum adds the rows in order, then the batches in order).

    Grouped in numpy (``bincount`` over one code per key combination): pyarrow's
    ``group_by`` imports pandas (~40 MiB, ~0.25 CPU s, through ``pyarrow.acero``) and
    cost ~0.5 CPU s per 10M rows, beside DuckDB's threads."""

    def __init__(self, keys: tuple[str, ...]):
        self.keys = keys
        self.index: dict[tuple, int] = {}
        self.firsts: list[tuple] = []  # per new group: (its batch, its first row)
        self.n: list[int] = []
        self.m: list[int] = []
        self.sums: dict[str, list[float]] = {name: [] for name, _ in SUMS}
        self.valid: dict[str, list[int]] = {name: [] for name, _ in SUMS}

    def add(self, batch, terms: dict) -> None:
        import pyarrow as pa

        """Group one batch (``terms``: :func:`_terms` of it) and add its groups to the totals."""
        codes = [_codes(batch.column(k)) for k in self.keys]
        combined = np.zeros(len(batch), dtype=np.int64)
        size = 1
        for c, values in codes:
            combined = combined * (len(values) + 1) + c
            size *= len(values) + 1
        if size > 4 * len(batch) + 1024:  # many distinct keys (unknown labels): compact the codes first
            present, combined = np.unique(combined, return_inverse=True)
            size = len(present)
        else:
            present = None
        counts = np.bincount(combined, minlength=size)
        sums, valid = {}, {}
        for name, (x, ok) in terms.items():
            sums[name] = np.bincount(combined, weights=x, minlength=size)
            valid[name] = counts if ok is None else np.bincount(combined, weights=ok, minlength=size)
        m = valid["loss"]
        new = []
        for g in np.flatnonzero(counts):
            code = int(present[g]) if present is not None else int(g)
            key = []
            for c, values in reversed(codes):
                code, here = divmod(code, len(values) + 1)
                key.append(_key(values[here - 1]) if here else None)
            key = tuple(reversed(key))
            i = self.index.get(key)
            if i is None:
                new.append((int(np.argmax(combined == g)), key))
                continue
            self._add(i, g, counts, m, sums, valid)
        for row, key in sorted(new, key=lambda t: t[0]):  # new groups in order of first appearance
            i = self.index[key] = len(self.n)
            self.firsts.append(tuple(batch.column(k).take(arrow.array([row], pa.int64())) for k in self.keys))
            self.n.append(0)
            self.m.append(0)
            for name, _ in SUMS:
                self.sums[name].append(0.0)
                self.valid[name].append(0)
            self._add(i, int(combined[row]), counts, m, sums, valid)

    def _add(self, i: int, g: int, counts, m, sums, valid) -> None:
        self.n[i] += int(counts[g])
        self.m[i] += int(m[g])
        for name, _ in SUMS:
            self.sums[name][i] += float(sums[name][g])
            self.valid[name][i] += int(valid[name][g])

    def table(self, schema, part: int):
        """The groups in :func:`read_stream`'s columns (``part`` 0 for a cell, 1 for a bin;
        the other keys NULL)."""
        import pyarrow as pa

        n = len(self.n)
        out = {"part": arrow.array([part] * n, pa.int32())}
        for key in ("k", "y", "p", "bin"):
            type_ = schema.field(key).type
            if key not in self.keys:
                out[key] = pa.nulls(n, type_)
            elif n:
                j = self.keys.index(key)
                out[key] = pa.concat_arrays([first[j] for first in self.firsts])
            else:
                out[key] = pa.nulls(0, type_)
        out |= {"n": arrow.array(self.n, pa.int64()), "m": arrow.array(self.m, pa.int64())}
        out |= {name: arrow.array([s if v else None for s, v in zip(self.sums[column], self.valid[column])],
                                  pa.float64()) for column, name in SUMS}
        return pa.table(out)


def _codes(column) -> tuple[np.ndarray, list]:
    """Per row a code 0..D of its value (0: NULL) and the D values (as Python keys): small
    non-negative integers (``k``, ``bin``) read as they are, anything else dictionary-encoded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(column)
    if column.null_count == n:
        return np.zeros(n, dtype=np.int64), []
    t = column.type
    if t in (pa.int32(), pa.int64()):  # sqlnb.store.arrow builds their -1 without pandas
        bounds = pc.min_max(column).as_py()
        if bounds["min"] >= 0 and bounds["max"] < 4096:
            x = arrow.numbers(arrow.filled(column, -1))  # NULL as -1: code 0
            return x.astype(np.int64) + 1, list(range(bounds["max"] + 1))
    elif pa.types.is_floating(t):
        x = arrow.floats(column)  # NULL as NaN
        nan = np.isnan(x)
        seen = x[~nan]
        if (int(nan.sum()) == column.null_count  # no NaN value, only NULLs
                and seen.min() >= 0 and seen.max() < 4096 and (seen == np.floor(seen)).all()):
            codes = np.nan_to_num(x, nan=-1.0).astype(np.int64) + 1
            return codes, [float(v) for v in range(int(seen.max()) + 1)]
    encoded = pc.dictionary_encode(column)
    codes = arrow.numbers(arrow.filled(encoded.indices, -1)).astype(np.int64) + 1
    return codes, encoded.dictionary.to_pylist()


def _key(value):
    """A group's key value: NaN as one key (pyarrow's groups and SQL's GROUP BY hold NaN
    equal to itself; Python's ``nan == nan`` is false)."""
    return "NaN" if isinstance(value, float) and value != value else value


def _terms(batch) -> dict:
    """Per column of :data:`SUMS`: its values as float64, NULL as 0.0 (NaN stays NaN), and
    1.0 where it is not NULL (None: no NULL), for the sums of :meth:`Groups.add`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = {}
    for name, _ in SUMS:
        column = batch.column(name)
        x = arrow.numbers(arrow.filled(pc.cast(column, pa.float64()), 0.0))
        ok = arrow.numbers(pc.cast(pc.is_valid(column), pa.float64())) if column.null_count else None
        out[name] = (x, ok)
    return out
