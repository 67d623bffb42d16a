"""Reference timings for the sqlnb benchmarks: the bare DuckDB scan and scikit-learn.

Every function takes the ``meta`` dict written by ``generate.py`` (``OUT/meta.json``) and a
repeat count, and returns ``{step: {"times": [...], "median": s, "min": s, "cpu": s}, ...}``
(``cpu``: median process CPU time, all threads; on a shared machine it is less inflated by
other processes than wall time) plus
``"peak_rss_mb"``: the peak resident set size of the process (``resource.getrusage``; on Linux
``ru_maxrss`` is in KiB). Peak RSS is a high-water mark for the whole process, so ``isolated()``
runs one baseline in a fresh interpreter and reports that child's own peak.

Baselines
---------
bare_scan
    ``SELECT sum(x0), ..., bit_xor(hash(c0)), ..., bit_xor(hash(label)) FROM read_parquet(glob)``:
    every column a fit reads, each value touched once (text: the token table
    ``sum(doc_id), bit_xor(hash(token)), sum(n)``, then the docs table). Not ``max(c)`` or
    ``count(c)``: DuckDB 2.0 answers those from Parquet row-group statistics without reading the
    column (131 kB read for 10M rows x 9 VARCHAR columns, 0.003 s).
sklearn
    ``load``: pyarrow ``read_table`` -> numpy; VARCHAR columns (labels, categoricals, tokens)
    are read as Arrow dictionaries straight from the Parquet dictionary pages and their indices
    used as codes (an ``OrdinalEncoder`` on object arrays would be many times slower, so this is
    scikit-learn's favourable path). ``fit`` and ``predict_proba`` run on the
    in-memory arrays and are timed separately.

    * wide: ``GaussianNB``.
    * mixed: ``GaussianNB`` on the DOUBLE columns + ``CategoricalNB`` on the codes; the joint
      log-likelihoods are added, the class log-prior counted once, then normalised (log-sum-exp).
    * categorical: ``CategoricalNB``.
    * text: CSR matrix (documents x terms, like ``CountVectorizer`` output) + ``MultinomialNB``.
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import duckdb
import numpy as np
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import col, parquet_table  # noqa: E402


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux: ``ru_maxrss`` is KiB)."""
    scale = 1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def timed(fn, repeat: int):
    """Call ``fn()`` ``repeat`` times.

    Returns
    -------
    stats : dict
        ``{"times": [...], "median": s, "min": s, "cpu": s}``: wall-clock seconds, and the median
        process CPU seconds (all threads).
    result
        The value returned by the last call.
    """
    times, cpu, result = [], [], None
    for _ in range(repeat):
        result = None  # free the previous result first: peak RSS then counts one copy
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"times": times, "median": statistics.median(times), "min": min(times), "cpu": statistics.median(cpu)}, result


def _files(glob: str) -> list[str]:
    """The files a ``*.parquet`` glob names, sorted (pyarrow takes a list, not a glob)."""
    p = Path(glob)
    return sorted(str(f) for f in p.parent.glob(p.name))


# --- DuckDB bare scan -------------------------------------------------------------------------


def scan_queries(meta: dict) -> list[str]:
    """The bare-scan statement(s): each column a fit reads, aggregated as cheaply as possible."""

    def scan(glob, numeric, other):
        touch = [exp.Anonymous(this="bit_xor", expressions=[exp.Anonymous(this="hash", expressions=[col(c)])]) for c in other]
        aggs = [exp.func("sum", col(c)) for c in numeric] + touch
        return exp.select(*aggs).from_(parquet_table(glob)).sql("duckdb")

    if meta["shape"] == "text":
        return [scan(meta["globs"]["tokens"], ["doc_id", "n"], ["token"]), scan(meta["globs"]["docs"], ["doc_id"], [meta["label"]])]
    return [scan(meta["globs"]["data"], meta["numeric"], meta["categorical"] + [meta["label"]])]


def bare_scan(meta: dict, repeat: int = 3, threads: int | None = None) -> dict:
    """Time the bare DuckDB scan on a fresh in-memory connection (default thread count)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    queries = scan_queries(meta)
    stats, _ = timed(lambda: [con.execute(q).fetchall() for q in queries], repeat)
    return {"bare_scan": stats, "peak_rss_mb": peak_rss_mb()}


# --- scikit-learn -----------------------------------------------------------------------------


def _read(glob: str, strings: list[str]):
    """``pyarrow.parquet.read_table`` with ``strings`` read as dictionaries unified across chunks."""
    import pyarrow.parquet as pq

    return pq.read_table(_files(glob), read_dictionary=strings).unify_dictionaries()


def _codes(column) -> np.ndarray:
    """int32 codes of a string column (dictionary indices; order = dictionary order)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = column.combine_chunks()
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    return arr.indices.to_numpy().astype(np.int32, copy=False)


def load_table(meta: dict):
    """Read a wide / mixed / categorical data set into numpy.

    Returns
    -------
    X_num : ndarray of shape (n, d_num), float64, or None
    X_cat : ndarray of shape (n, d_cat), int32 codes, or None
    y : ndarray of shape (n,), int32 class codes
    """
    num, cat = meta["numeric"], meta["categorical"]
    table = _read(meta["globs"]["data"], cat + [meta["label"]])
    X_num = np.column_stack([table[c].to_numpy() for c in num]) if num else None
    X_cat = np.column_stack([_codes(table[c]) for c in cat]) if cat else None
    return X_num, X_cat, _codes(table[meta["label"]])


def load_text(meta: dict):
    """Read the docs and tokens tables into a CSR count matrix.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_docs, n_terms)
        Row ``r`` is the document at position ``r`` of the docs table; duplicate (doc, token)
        rows would be summed, as ``CountVectorizer`` counts them.
    y : ndarray of shape (n_docs,), int32 class codes
    """
    import scipy.sparse as sp

    docs = _read(meta["globs"]["docs"], [meta["label"]])
    tokens = _read(meta["globs"]["tokens"], ["token"])
    doc_ids = docs["doc_id"].to_numpy()
    order = np.argsort(doc_ids, kind="stable")
    rows = order[np.searchsorted(doc_ids, tokens["doc_id"].to_numpy(), sorter=order)]
    cols = _codes(tokens["token"])
    X = sp.csr_matrix((tokens["n"].to_numpy().astype(np.float64), (rows, cols)), shape=(len(doc_ids), int(cols.max()) + 1))
    return X, _codes(docs[meta["label"]])


class MixedNB:
    """GaussianNB on numeric columns + CategoricalNB on codes, one shared class prior.

    ``jll = jll_gauss + jll_cat - log prior``, since each part adds the log prior once.
    """

    def fit(self, X_num, X_cat, y):
        from sklearn.naive_bayes import CategoricalNB, GaussianNB

        self.gauss_ = GaussianNB().fit(X_num, y)
        self.cat_ = CategoricalNB().fit(X_cat, y)
        return self

    def predict_proba(self, X_num, X_cat):
        from scipy.special import logsumexp

        jll = self.gauss_.predict_joint_log_proba(X_num) + self.cat_.predict_joint_log_proba(X_cat) - self.cat_.class_log_prior_
        return np.exp(jll - logsumexp(jll, axis=1, keepdims=True))


def sklearn_baseline(meta: dict, repeat: int = 3) -> dict:
    """Time scikit-learn's load / fit / predict_proba for the data set's shape."""
    from sklearn.naive_bayes import CategoricalNB, GaussianNB, MultinomialNB

    shape = meta["shape"]
    if shape == "text":
        load_stats, (X, y) = timed(lambda: load_text(meta), repeat)
        make, fit_args, pred_args = MultinomialNB, (X, y), (X,)
    else:
        load_stats, (X_num, X_cat, y) = timed(lambda: load_table(meta), repeat)
        if shape == "wide":
            make, fit_args, pred_args = GaussianNB, (X_num, y), (X_num,)
        elif shape == "categorical":
            make, fit_args, pred_args = CategoricalNB, (X_cat, y), (X_cat,)
        else:
            make, fit_args, pred_args = MixedNB, (X_num, X_cat, y), (X_num, X_cat)
    fit_stats, model = timed(lambda: make().fit(*fit_args), repeat)
    pred_stats, proba = timed(lambda: model.predict_proba(*pred_args), repeat)
    return {
        "sklearn_load": load_stats,
        "sklearn_fit": fit_stats,
        "sklearn_predict_proba": pred_stats,
        "sklearn_train_accuracy": float(np.mean(proba.argmax(axis=1) == y)),
        "peak_rss_mb": peak_rss_mb(),
    }


def isolated(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` in a fresh interpreter (spawn), so peak RSS is its own."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args, **kwargs).result()
