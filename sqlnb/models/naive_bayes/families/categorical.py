"""Categorical naive Bayes: a histogram per class over the values of a column.

A category is any value of any type (strings, integers, booleans, dates); no integer
coding is needed. With the estimator's effective pseudo-count α (posterior mean α, MAP
α − 1, MLE 0)::

    flp_j[c, v] = ln(N_cjv + α) − ln(N_cj + α·n_j)      n_j = distinct training values
    term_cj     = flp_j[c, x_j]                           0 when NULL

Values never seen in training follow ``unseen``: ``"missing"`` (default) treats them
like NULL — no evidence either way; ``"bucket"`` reserves one extra smoothed slot per
feature (n_j + 1 categories), so an unseen value costs each class ln(α / (N_cj + α(n_j+1))).
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.sql.types import is_float, is_numeric, is_text_type
from sqlnb.stats import Counts, sorted_values
from sqlnb.models.naive_bayes.families.base import Family, log_ratio
from sqlnb.engines.duckdb import new_connection

#: Largest vocabulary DuckDB scoring inlines (:meth:`Categorical.in_place_term`); a larger
#: one is joined (:meth:`Categorical.packed_join`). In place, each value costs about 1 ms
#: per query to build, render, parse and bind (1,000 values: ~1 s to score 10 rows;
#: 100,000: 66 s and 4.3 GB); packed, 100,000 values cost ~0.2 s. Measured on a loaded
#: 2-core machine, 3 classes, best of 5, 10 rows | 1M rows (seconds):
#:
#:   values      30           100          300          1,000
#:   in place    0.03 | 0.23  0.10 | 0.36  0.13 | 0.47  1.00 | 1.23
#:   packed      0.03 | 0.28  0.05 | 0.35  0.04 | 0.24  0.04 | 0.23
#:
#: and at 10M rows with 100 values, 2.17 s in place against 1.99 s packed (sort included).
#: In place streams in the scan's order; packed sorts on the row number at the end.
INLINE_MAX = 100
#: Largest vocabulary exported to other dialects, where the lookup is a ``VALUES`` list:
#: building and rendering it costs ~1.7 ms per value (5,000 values: 8 s; 20,000: 36 s;
#: 100,000: 130 s to print the PostgreSQL SELECT).
EXPORT_MAX = 10_000


class Categorical(Family):
    name = "categorical"

    def check_type(self, feature, where):
        return None  # any type is a category

    def raw(self, feature) -> exp.Expression:
        return sql.col(feature.name, "src")

    def aggregates(self, feature, weight):
        # Unweighted: DuckDB's histogram() gives every value's count in the class's
        # group, so categorical columns cost no extra scan (measured in MEASURED.md's
        # shape: one GROUP BY with histograms vs GROUPING SETS over (label, column)).
        if weight is None:
            return [exp.Anonymous(this="histogram", expressions=[self.raw(feature)])]
        return []

    def collect(self, feature, rows, classes, where):
        hists = [dict(r[0] or {}) for r in rows]
        return counts_from(hists, feature, where)

    def estimate(self, features, stats, class_n, hp):
        out = {}
        bucket = hp.unseen == "bucket"
        for f in features:
            s = stats[f.name]
            a = hp.pseudo(hp.alpha_for(f.name))
            n_j = len(s.values) + (1 if bucket else 0)
            den = (s.n + a * n_j)[:, None]
            flp = log_ratio(s.counts + a, np.broadcast_to(den, s.counts.shape), f"feature {f.name!r}")
            unseen = log_ratio(np.full(len(den), a), den[:, 0], f"feature {f.name!r}") if bucket else None
            out[f.name] = (list(s.values), flp, unseen)
        return out

    @staticmethod
    def alias(feature) -> str:
        return f"lookup {feature.name}"

    def join(self, feature, params) -> exp.Join | None:
        """``LEFT JOIN (VALUES (v, flp_0, …, flp_K−1), …) AS "lookup <name>"(v, c0, …)``.

        One lookup row per training value holding every class's log-probability: a hash
        join per categorical column instead of a K-way CASE chain per class (measured at
        1M rows × 8 columns × 3 classes: 1.95 s joined vs 7.7 s as CASE, machine loaded
        alike). A NULL or unseen value finds no row, so its term is the ELSE of
        :meth:`term`.
        """
        values, flp, _ = params
        if not values:
            return None
        K = flp.shape[0]
        rows = [tuple([sql.value(v, feature.sql_type)] + [sql.dbl(float(flp[k, i])) for k in range(K)])
                for i, v in enumerate(values)]
        table = exp.values(rows, alias=self.alias(feature), columns=["v"] + [f"c{k}" for k in range(K)])
        table.args["alias"].set("this", sql.ident(self.alias(feature)))
        for c in table.args["alias"].args.get("columns", []):
            c.set("quoted", True)
        on = exp.EQ(this=self.raw(feature), expression=sql.col("v", self.alias(feature)))
        return exp.Join(this=table, on=on, side="LEFT")

    def term(self, feature, params, k, input_type: str | None = None):
        """The class's log-probability read from the row :meth:`join` found: 0 without
        one, or with ``unseen="bucket"`` the bucket's unless the value is missing (NULL, or
        NaN when the input, ``input_type`` or else the fitted type, can hold it)."""
        values, _, unseen = params
        if not values:
            return sql.dbl(0.0)
        return self._seen_or_not(feature, sql.col(f"c{k}", self.alias(feature)), unseen, k, input_type)

    def in_place_term(self, feature, params, k, input_type: str | None = None):
        """The same term without a join (DuckDB), so the scored rows keep their order.

        The value is read with the fitted type and found among the training values by a
        cast to an ``ENUM`` of their text (a hash lookup, like the join's; measured at 10M
        rows × 2 columns × 3 classes: 0.68–0.72 s against 0.61–0.65 s joined, and a
        K-way CASE 0.89–1.0 s)::

            code = enum_code(TRY_CAST(CAST(TRY_CAST(x AS <fitted type>) AS VARCHAR) AS ENUM(values)))
            term = COALESCE([flp_k(v) for v in values][code + 1], 0)

        A value that does not cast to the fitted type, or casts to a value never seen in
        training, finds no position: it follows ``unseen`` (missing by default). So the
        text ``'07'`` of a column fitted as BIGINT is the value 7, and a BIGINT 7 scored by
        a column fitted as text is ``'7'`` (never ``'07'``). NaN is missing.

        The ENUM and the K lists hold one SQL literal per training value, which DuckDB
        parses and binds in every query: past :data:`INLINE_MAX` values the model scores
        with :meth:`packed_join` and :meth:`packed_term` instead.
        """
        values, flp, unseen = params
        if not values:
            return sql.dbl(0.0)
        code = self.position(feature, values, input_type)
        weights = exp.Array(expressions=[sql.dbl(float(flp[k, i])) for i in range(len(values))])
        hit = exp.Anonymous(this="list_extract", expressions=[weights, exp.Add(this=code, expression=exp.Literal.number(1))])
        return self._seen_or_not(feature, hit, unseen, k, input_type)

    def packed_term(self, feature, params, k, input_type: str | None = None):
        """:meth:`in_place_term` for a large vocabulary: the class's log-probability read
        from the row :meth:`packed_join` found (none for NULL, NaN, a value that does not
        cast to the fitted type and an unseen one, which follow ``unseen`` as in place)."""
        values, _, unseen = params
        if not values:
            return sql.dbl(0.0)
        return self._seen_or_not(feature, sql.col(f"c{k}", self.alias(feature)), unseen, k, input_type)

    def _seen_or_not(self, feature, hit, unseen, k, input_type):
        """``hit`` (NULL when the value has no lookup row) as the term: 0 without a row,
        or with ``unseen="bucket"`` the bucket's log-probability unless the value is
        missing (NULL, or NaN when the input can hold it)."""
        if unseen is None:
            return exp.Coalesce(this=hit, expressions=[sql.dbl(0.0)])
        # Without the input's type (SQL exported for a table of unknown columns), the
        # fitted type: a column fitted as DOUBLE is read as one.
        missing = sql.missing(self.raw(feature), nan=is_float(input_type or feature.sql_type))
        return exp.Case(ifs=[exp.If(this=missing, true=sql.dbl(0.0))],
                        default=exp.Coalesce(this=hit, expressions=[sql.dbl(float(unseen[k]))]))

    def packed_join(self, feature, params, input_type: str | None = None) -> exp.Join | None:
        """A DuckDB lookup of a large vocabulary that costs O(values) to read, not to parse.

        The lookup's rows come from a few string literals, however many values there are:
        the training values' text (as :meth:`position` compares them) in one JSON list,
        and for each value the number of its column of log-probabilities among the
        distinct columns ``(flp_0, …, flp_K−1)`` — few, since they depend on the value
        only through its per-class counts (with unweighted rows and 100,000 values seen
        once each, K of them) — with each class's distinct log-probabilities as shortest
        round-trip reprs (``repr`` round-trips; ``inf``, ``-inf`` are DuckDB spellings
        too, so the probabilities equal the in-place ones exactly)::

            LEFT JOIN (SELECT v, list_extract(CAST(stringsql.packed_list('flp_k of column 0,…', ',')
                                                   AS DOUBLE[]), code + 1) AS c<k>, …
                       FROM (SELECT unnest(from_json('["v", …]', '["VARCHAR"]')) AS v,
                                    unnest(CAST(stringsql.packed_list('code,…', ',') AS INTEGER[])) AS code))
                 AS "lookup <name>" ON CAST(TRY_CAST(x AS <fitted type>) AS VARCHAR) = v

        (the value read with the fitted type as in :meth:`position`, ``input_type`` being
        the input's type when known).

        DuckDB folds the constant lists once and hash-joins. The join does not keep the
        scan's order: the scoring SELECT numbers the rows and sorts on that number
        (``keep_order``). Text values are distinct; other types are checked to print as
        distinct texts, so a row finds at most one lookup row.
        """
        values, flp, _ = params
        if not values:
            return None
        texts = value_texts(tuple(values), feature.sql_type)
        if len(set(texts)) != len(texts):
            raise SqlnbError(f"categorical column {feature.name!r}: two training values of type "
                             f"{feature.sql_type} print as the same text, so they cannot be told apart when scored")
        distinct, code = distinct_columns(np.asarray(flp, dtype=float))
        packed = exp.select(exp.alias_(_unnest(json_list(texts)), "v", quoted=True),
                            exp.alias_(_unnest(sql.packed_list(code.tolist(), "INTEGER")), "code", quoted=True))
        one_based = exp.Add(this=sql.col("code"), expression=exp.Literal.number(1))
        table = exp.select(sql.col("v"), *(
            exp.alias_(exp.Anonymous(this="list_extract", expressions=[sql.packed_list(distinct[:, k].tolist(), "DOUBLE"),
                                                                       one_based.copy()]), f"c{k}", quoted=True)
            for k in range(flp.shape[0]))).from_(exp.Subquery(this=packed, alias=exp.TableAlias(
                this=sql.ident("packed"))))
        on = exp.EQ(this=self._text_key(feature, input_type), expression=sql.col("v", self.alias(feature)))
        return exp.Join(this=exp.Subquery(this=table, alias=exp.TableAlias(this=sql.ident(self.alias(feature)))),
                        on=on, side="LEFT")

    def position(self, feature, values, input_type: str | None = None) -> exp.Expression:
        """0-based position of the row's value among the training ``values`` (DuckDB), NULL
        for NULL, for a value that does not cast to the fitted type and for an unseen one.

        Up to :data:`INLINE_MAX` values, ``enum_code`` of a cast to an ENUM of their text;
        past it, a correlated subquery over the values packed in one literal (as in
        :meth:`packed_join`), which DuckDB plans as a hash join: it keeps no row order, so
        it serves aggregates (the unseen-value check), while scoring joins. Without training
        values (a column NULL in every training row) no value has a position: NULL (an ENUM
        of no values is no type).
        """
        if not values:
            return exp.Cast(this=exp.Null(), to=exp.DataType.build("INTEGER"))
        key, texts = self._text_key(feature, input_type), value_texts(tuple(values), feature.sql_type)
        if len(values) > INLINE_MAX:
            alias = f"positions {feature.name}"
            table = exp.select(exp.alias_(_unnest(json_list(texts)), "v", quoted=True),
                               exp.alias_(_unnest(exp.func("range", exp.Literal.number(len(texts)))), "i", quoted=True))
            found = (exp.select(sql.col("i", alias))
                     .from_(exp.Subquery(this=table, alias=exp.TableAlias(this=sql.ident(alias))))
                     .where(exp.EQ(this=sql.col("v", alias), expression=key)))
            return exp.Subquery(this=found)
        enum = exp.DataType(this=exp.DataType.Type.ENUM, expressions=[exp.Literal.string(s) for s in texts])
        return exp.func("enum_code", exp.TryCast(this=key, to=enum))

    def _text_key(self, feature, input_type: str | None) -> exp.Expression:
        """The row's value read with the fitted type, as text: what :func:`value_texts`
        holds for the training values (NULL when it does not cast: :func:`sqlnb.sql.read_as`)."""
        x = self.raw(feature)
        if input_type is None or input_type.upper() != feature.sql_type.upper():
            x = sql.read_as(x, feature.sql_type, input_type)
        if not is_text_type(feature.sql_type):
            x = exp.Cast(this=x, to=exp.DataType.build("varchar"))
        return x


def unheld(values, sql_type: str) -> list[str]:
    """The text of each of ``values`` (categories read with another type: a batch to
    update with) that the fitted ``sql_type`` cannot hold exactly, as :func:`sqlnb.sql.read_as`
    decides when scoring: ``1.5`` (but not ``2.0``) for BIGINT. Stored as a category of
    such a column, 1.5 would print as 2, the text of another one."""
    if not values or not is_numeric(sql_type) or is_float(sql_type):
        return []
    v = sql.col("v", "batch")
    query = (exp.select(v).from_(exp.Subquery(this=exp.select(exp.alias_(_unnest(json_list(map(str, values))), "v",
                                                                         quoted=True)),
                                              alias=exp.TableAlias(this=sql.ident("batch"))))
             .where(exp.Is(this=sql.read_as(v.copy(), sql_type, "VARCHAR"), expression=exp.Null())))
    con = new_connection()
    try:
        return [r[0] for r in con.execute(sql.render(query)).fetchall()]
    finally:
        con.close()


def _unnest(e: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="unnest", expressions=[e])


def distinct_columns(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct columns of ``a`` (as rows) and each column's number among them
    (``np.unique(a.T, axis=0, return_inverse=True)``, which sorts the columns as opaque
    records and took 0.16 s for 3 × 100,000; lexsort and a diff, 0.01 s)."""
    order = np.lexsort(a[::-1])
    ordered = a[:, order]
    new = np.ones(a.shape[1], dtype=bool)
    new[1:] = np.any(ordered[:, 1:] != ordered[:, :-1], axis=0)
    code = np.empty(a.shape[1], dtype=np.int64)
    code[order] = np.cumsum(new) - 1
    return ordered[:, new].T, code


@functools.lru_cache(maxsize=256)
def value_texts(values: tuple, sql_type: str) -> tuple[str, ...]:
    """Each training value as DuckDB writes it as text once read with the fitted type
    (``CAST(CAST(v AS <fitted type>) AS VARCHAR)``), so that an input cast to the fitted
    type and then to text finds it. Text values are themselves; other types ask DuckDB
    once, for all values in one list cast (dates, timestamps and doubles print in its own
    spelling; a REAL prints as the float it is, not as the double it was read back as)."""
    if is_text_type(sql_type):
        return tuple(map(str, values))
    fitted = exp.DataType.build(sql_type, dialect="duckdb")
    as_list = [exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[t], nested=True)
               for t in (exp.DataType.build("varchar"), fitted)]
    # One JSON string of Python's text of each value, which DuckDB casts as it would the
    # literal sql.value(v) writes: far cheaper to parse than one literal per value.
    texts = exp.Cast(this=exp.Cast(this=json_list(map(str, values)), to=as_list[1]), to=as_list[0])
    con = new_connection()
    try:
        return tuple(con.execute(sql.render(exp.select(texts))).fetchone()[0])
    finally:
        con.close()


def json_list(texts) -> exp.Expression:
    """``from_json('["…", …]', '["VARCHAR"]')``: a VARCHAR list of any size as one string
    literal (control characters, quotes and NUL are escaped by JSON)."""
    return exp.Anonymous(this="from_json", expressions=[
        exp.Literal.string(json.dumps(list(texts), ensure_ascii=False)), exp.Literal.string('["VARCHAR"]')])


def nan_as_null_text(name: str) -> str:
    """``CASE WHEN ISNAN("name") THEN NULL ELSE "name" END AS "name"``: what a source query
    selects to read a column's NaN as NULL (:func:`sqlnb.sql.nan_as_null`; ``NULLIF(name,
    'NaN')`` is folded away by DuckDB over Parquet files written by pyarrow)."""
    return sql.render(exp.alias_(sql.nan_as_null(sql.col(name)), name, quoted=True))


def counts_from(hists: list[dict], feature=None, where: str = "the data") -> Counts:
    """Per-class ``{value: count}`` dicts -> :class:`Counts` (NULL values dropped).

    NaN is refused, as for every numeric family: it is not a category (NaN = NaN is true
    in DuckDB, so it would be one value at fit and match nothing or everything when
    scored), and at scoring it counts as missing."""
    if any(isinstance(v, float) and math.isnan(v) for h in hists for v in h):
        name = feature.name if feature is not None else "?"
        raise SqlnbError(f"column {name!r} in {where} holds NaN; a category cannot be NaN: make it NULL "
                         f"in a source query ({nan_as_null_text(name)}) so it counts as missing, or filter "
                         "those rows")
    values = sorted_values(v for h in hists for v in h if v is not None)
    pos = {v: i for i, v in enumerate(values)}
    counts = np.zeros((len(hists), len(values)))
    for k, h in enumerate(hists):
        for v, n in h.items():
            if v is not None:
                counts[k, pos[v]] += float(n)
    return Counts(values, counts)
