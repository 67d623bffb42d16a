"""Mutual information between each discrete feature and the class, from a model's
stored counts (no data is read), and selection of the K most informative features.

For a feature X with per-(class, value) counts ``n(c, v)`` over the rows where X is not
NULL (weighted when the fit was), ``N = Σ n(c, v)``::

    I(X; Y) = Σ_{c,v} n(c,v)/N · ln( n(c,v)·N / (n(c)·n(v)) )      (nats; 0·ln 0 = 0)

with ``n(c)`` and ``n(v)`` the margins of those same rows — what
``sklearn.metrics.mutual_info_score(x, y)`` gives on the rows where x is not NULL. The
tables come from the statistics each family already keeps:

* categorical and ``binned``: the (class, value or bin) counts;
* bernoulli: present ``N_cj`` against absent ``N_c − N_cj`` (after ``binarize``);
* token bags (text, LIST, MAP): per term, documents holding it against documents not
  holding it, among those whose bag is not NULL — the term's *presence*, whatever the
  family (multinomial bags too). scikit-learn's ``mutual_info_classif(X, y,
  discrete_features=True)`` on a count matrix instead treats every distinct count as a
  category (0, 1, 2, … occurrences), which per-(class, term) statistics cannot hold; on
  a binary matrix (``CountVectorizer(binary=True)``) the two agree.

Gaussian columns and count columns (multinomial, complement) have no discrete values
stored, hence no mutual information; ``binned`` (``bins="mdl"``) gives a numeric column one.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sqlnb.errors import SqlnbError
from sqlnb.stats import Counts, Statistics, Sums


def table_mi(table: np.ndarray) -> float:
    """I(X; Y) in nats of one (classes × values) contingency table of counts."""
    t = np.asarray(table, dtype=float)
    n = t.sum()
    if n <= 0:
        return 0.0
    nc, nv = t.sum(axis=1), t.sum(axis=0)
    k, v = np.nonzero(t)
    cell = t[k, v]
    # ln(n_cv) + ln(N) − ln(n_c) − ln(n_v): logs of counts, never of tiny ratios
    mi = float(np.sum(cell / n * (np.log(cell) + np.log(n) - np.log(nc[k]) - np.log(nv[v]))))
    return max(mi, 0.0)  # rounding can leave −1e-17 for an independent table


def presence_mi(present: np.ndarray, n: np.ndarray) -> np.ndarray:
    """I(X_j; Y) of binary features from per-class present counts ``present`` (K × m)
    and per-class non-NULL counts ``n`` (K,): one 2 × K table per feature, vectorised."""
    present = np.asarray(present, dtype=float).reshape(len(n), -1)
    n = np.asarray(n, dtype=float)
    absent = n[:, None] - present
    N = n.sum()
    if N <= 0:
        return np.zeros(present.shape[1])
    out = np.zeros(present.shape[1])
    for cells in (present, absent):
        margin = cells.sum(axis=0)  # n(v) for this value of X, per feature
        with np.errstate(divide="ignore", invalid="ignore"):
            part = cells / N * (np.log(cells) + np.log(N) - np.log(n)[:, None] - np.log(margin)[None, :])
        out += np.where(cells > 0, part, 0.0).sum(axis=0)
    return np.maximum(out, 0.0)


def _bernoulli_mi(stat: Sums) -> float:
    return float(presence_mi(np.asarray(stat.total)[:, None], stat.n)[0])


def ranking(features: Sequence, stats: Statistics) -> tuple[list[tuple[str, str | None, str, float]], list[str]]:
    """Every measurable (feature, term) with its MI, most informative first, and the
    features that have none.

    Returns
    -------
    rows : list of (feature, term or None, kind, mi)
        Ties in MI by feature name, then term (code-point order).
    skipped : list of str
        Features without mutual information (Gaussian, multinomial or complement columns).
    """
    rows, skipped = [], []
    for f in features:
        st = stats.features[f.name]
        if f.bag is not None:
            mi = presence_mi(st.docs, st.n)
            rows += [(f.name, t, f.kind, float(v)) for t, v in zip(st.terms, mi)]
        elif isinstance(st, Counts):
            rows.append((f.name, None, f.kind, table_mi(st.counts)))
        elif f.kind == "bernoulli":
            rows.append((f.name, None, f.kind, _bernoulli_mi(st)))
        else:
            skipped.append(f.name)
    rows.sort(key=lambda r: (-r[3], r[0], r[1] or ""))
    return rows, skipped


def mutual_information(model: Any):
    """``model``'s features ranked by mutual information with the class, from its stored
    counts (see the module docstring).

    Returns
    -------
    pyarrow.Table
        ``feature``, ``term`` (the token of a bag's term, NULL for a column), ``kind`` and
        ``mi`` (nats), most informative first. ``table.schema.metadata[b"skipped"]`` lists
        (comma-separated) the features that have no mutual information.
    """
    import pyarrow as pa
    rows, skipped = ranking(model.features, model.stats)
    cols = list(zip(*rows)) if rows else [[], [], [], []]
    t = pa.table({"feature": pa.array(cols[0], pa.string()), "term": pa.array(cols[1], pa.string()),
                  "kind": pa.array(cols[2], pa.string()), "mi": pa.array(cols[3], pa.float64())})
    return t.replace_schema_metadata({"skipped": ",".join(skipped)})


def select_k(features: Sequence, stats: Statistics, k: int) -> tuple[list, Statistics, dict]:
    """Keep the ``k`` most informative features (:func:`ranking`): columns and bag terms
    compete in one ranking (a bag keeps the terms that made it, and is dropped when none
    did); features without mutual information are kept as they are.

    Returns the kept features, their statistics and a report entry
    ``{"k": k, "kept": n, "dropped": [names]}``.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise SqlnbError(f"select_k (--select-k) must be a whole number >= 1, not {k!r}")
    rows, _ = ranking(features, stats)
    best = rows[:k]
    columns = {r[0] for r in best if r[1] is None}
    terms: dict[str, list] = {}
    for r in best:
        if r[1] is not None:
            terms.setdefault(r[0], []).append(r[1])
    kept, feats, dropped = [], {}, []
    measured = {r[0] for r in rows}
    for f in features:
        st = stats.features[f.name]
        if f.name not in measured:
            kept.append(f)
            feats[f.name] = st
        elif f.bag is not None and f.name in terms:
            kept.append(f)
            feats[f.name] = st.keep_terms(terms[f.name])
        elif f.name in columns:
            kept.append(f)
            feats[f.name] = st
        else:
            dropped.append(f.name)
    if not kept:
        raise SqlnbError("select_k left no feature")
    # The pair counts (TAN, AODE, KDB) among the kept features are the ones a fit on those
    # features alone gathers: the structure is then learnt on the kept features only.
    out = Statistics(stats.classes, stats.class_n, stats.class_rows, feats, stats.null_label_rows,
                     pairs=None if stats.pairs is None else stats.pairs.restricted(set(feats)),
                     cuts={k: v for k, v in stats.cuts.items() if k in feats})
    return kept, out, {"k": k, "kept": len(best), "dropped": dropped}


# -- TAN's tree (Friedman, Geiger & Goldszmidt 1997) ------------------------------------
def conditional_mutual_information(counts: np.ndarray) -> float:
    """I(X_a; X_b | C) in nats from one pair's (K, |a|, |b|) counts (the docstring of :mod:`sqlnb.models.naive_bayes.tan`)."""
    N = counts.sum()
    if N <= 0:
        return 0.0
    nc = counts.sum(axis=(1, 2))[:, None, None]
    na = counts.sum(axis=2)[:, :, None]
    nb = counts.sum(axis=1)[:, None, :]
    hit = counts > 0
    # Every factor of the ratio is positive where n(c,u,v) is.
    ratio = (counts * nc)[hit] / (na * nb * np.ones_like(counts))[hit]
    return float(np.sum(counts[hit] * np.log(ratio)) / N)


def chow_liu(weights: np.ndarray) -> list[int | None]:
    """Parent of each node in the maximum spanning tree of a symmetric weight matrix,
    grown by Prim's algorithm from node 0 (None); ties go to the smallest node, then the
    smallest parent."""
    F = len(weights)
    parent: list[int | None] = [None] * F
    in_tree = [0]
    while len(in_tree) < F:
        best = None
        for v in range(F):
            if v in in_tree:
                continue
            for u in sorted(in_tree):
                if best is None or weights[u, v] > best[0]:
                    best = (weights[u, v], u, v)
        _, u, v = best
        parent[v] = u
        in_tree.append(v)
    return parent
