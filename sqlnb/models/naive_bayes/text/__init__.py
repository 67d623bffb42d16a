"""Token bags: text, LIST and MAP columns, and long token tables, as naive Bayes features.

A column given kind ``multinomial``, ``bernoulli`` or ``complement`` whose type is text
(VARCHAR), a list of strings (``VARCHAR[]``) or a map from strings to counts
(``MAP(VARCHAR, <number>)``) is a *bag of tokens*; so is a long table of
(document id, token[, count]) rows with the labels in a second table
(:func:`sqlnb.fit_long`). Each vocabulary term is one feature of the family, so a bag
sits next to numeric and categorical columns in one model (and a multinomial bag shares
its denominator with the model's other multinomial columns, as scikit-learn's
``MultinomialNB`` over ``hstack([counts, CountVectorizer(...)])`` would).

Tokenizing (text columns, in SQL)::

    tokens = regexp_extract_all(lower(text), pattern)      default pattern [\\pL\\pN_]{2,}

scikit-learn's ``CountVectorizer`` uses Python's ``(?u)\\b\\w\\w+\\b``; DuckDB's
``regexp_extract_all`` runs RE2, whose ``\\w`` and ``\\b`` are ASCII-only (``café`` would
give ``caf``). A match of ``\\b\\w\\w+\\b`` is a maximal run of two or more word characters,
and Python's Unicode ``\\w`` is letters, digits and ``_``, so the default RE2 pattern
``[\\pL\\pN_]{2,}`` (leftmost-first, greedy) yields the same tokens — checked on every
sms_spam message and on accented, Greek, CJK and superscript text. Remaining differences
come from ``lower()``: DuckDB lower-cases ``İ`` to ``i`` (Python: ``i̇``, two code points)
and a final ``Σ`` to ``σ`` (Python: ``ς``). A pattern given as an option is RE2 syntax;
scikit-learn's default spelling is accepted and mapped to the RE2 equivalent.

Statistics (:class:`~sqlnb.stats.Bag`), per class ``c`` and term ``v``, from one
``GROUP BY label, token`` over the unnested bags (a separate statement from the wide
scan, which only adds each bag's document counts)::

    total[c, v] = Σ w·count            multinomial / complement
    docs[c, v]  = Σ w·[count > t]      Bernoulli N_cj; document frequency for MI and min_df
    n[c]        = Σ w·[bag not NULL]   Bernoulli N_c

Vocabulary pruning happens in the same statement, like ``CountVectorizer``'s
``min_df``/``max_df``/``max_features``: document frequency (unweighted) within bounds,
then the ``max_features`` terms with the largest corpus count (ties: term order).
``select_k`` then keeps the K terms with the largest mutual information with the class,
computed in SQL from those statistics (:func:`mutual_information`); no rescan.

Scoring touches only the tokens present in a document. Each bag's parameters are one row
per term holding every class's weight (``w_cv``: multinomial ``flp``, complement ``w``,
Bernoulli ``flp − neg``); a document's contribution ``Σ_tokens count·w_cv`` comes from a
``CROSS JOIN LATERAL`` over its unnested tokens (wide layouts) or from the token rows
grouped by document id and LEFT JOINed to the documents (long layout). Bernoulli adds
the per-class constant ``Σ_v neg_cv`` (NUMERICS.md) to every non-NULL bag, so absent
terms cost nothing per row. Out-of-vocabulary tokens find no parameter row.

Query shapes measured (300k documents, 20 classes, 50k terms, 13.6M token rows, DuckDB
2.0 on a shared 2-core VM under load ≈ 6, so ratios only; each query consumed two of the
20 class sums, and DuckDB drops unused aggregates, so these compare join shapes): tokens ⋈
one parameter row per term carrying all classes, grouped per document — long layout
4.3 s; the same over a LIST column as ``CROSS JOIN LATERAL (… unnest(list) …)`` 6.0 s
(DuckDB decorrelates it into one hash join and a grouping by its own row index); a
correlated scalar subquery returning a STRUCT of the K sums 13.2 s; numbering the rows
with ``row_number()`` and joining the grouped sums back 6.2–7.3 s. MEASURED.md has one
row per (term, class) at 6× the one-row-per-term time. So: LATERAL for columns,
GROUP BY id + LEFT JOIN for long. With all 20 sums live the grouping dominates
(``score_long`` 15.8 s at load ≈ 7; the log-sum-exp finish over a materialized table
0.4 s); ``benchmarks/README.md`` (## Text) compares it with scikit-learn.

The parameter rows are inlined so the scoring SELECT stays self-contained: each column
is one JSON array literal unnested in SQL (``unnest(CAST(CAST('[…]' AS JSON) AS
DOUBLE[]))``; JSON numbers are Python's shortest round-trip ``repr``, and DuckDB parses
them back to the same doubles; ``null`` stands for −inf, which JSON cannot spell). As a
``VALUES`` list of ``CAST(… AS DOUBLE)`` literals, 50k terms × 20 classes are a million
sqlglot nodes, which did not build and render within 10 minutes; the JSON form parses in
~1–2 s (under load). The in-database long-layout path (:meth:`NaiveBayes.score_long`)
writes the rows to a temporary table instead (:func:`parameter_table`).
Token bags export to DuckDB SQL only (``regexp_extract_all``, ``list_aggr``, maps).
"""

from __future__ import annotations

import json
import numbers
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.families import REGISTRY, Feature, is_numeric
from sqlnb.models.naive_bayes.families.base import Family, wcount
from sqlnb.stats import Bag

BAG_KINDS = ("multinomial", "bernoulli", "complement")
#: RE2 spelling of scikit-learn's ``(?u)\b\w\w+\b`` (see the module docstring).
DEFAULT_TOKEN_PATTERN = r"[\pL\pN_]{2,}"
SKLEARN_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
_NEG_INF = float("-inf")


# -- options -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextOptions:
    """How a bag is tokenized and its vocabulary chosen at fit time.

    Parameters
    ----------
    lowercase : bool
        Lower-case text before tokenizing (text columns only).
    token_pattern : str
        RE2 regular expression whose matches are the tokens (text columns only).
    stop_words : sequence of str
        Tokens dropped at fit time (so they are not in the vocabulary, and ignored when
        scoring). Compared with tokens after lower-casing.
    min_df, max_df : int or float
        Keep terms whose document frequency is ``>= min_df`` and ``<= max_df``: an int is
        a number of documents, a float in [0, 1] a share of them (scikit-learn's rule).
    max_features : int, optional
        Then keep the terms with the largest total count over the corpus (ties: term order).
    select_k : int, optional
        Then keep the K terms with the largest mutual information with the class.
    """

    lowercase: bool = True
    token_pattern: str = DEFAULT_TOKEN_PATTERN
    stop_words: tuple = ()
    min_df: float = 1
    max_df: float = 1.0
    max_features: int | None = None
    select_k: int | None = None

    def __post_init__(self):
        if self.token_pattern == SKLEARN_TOKEN_PATTERN:
            object.__setattr__(self, "token_pattern", DEFAULT_TOKEN_PATTERN)
        if not isinstance(self.token_pattern, str) or not self.token_pattern:
            raise SqlnbError(f"token_pattern must be a non-empty RE2 pattern, not {self.token_pattern!r}")
        if isinstance(self.stop_words, str):
            raise SqlnbError("stop_words must be a list of words, not one string")
        object.__setattr__(self, "stop_words", tuple(sorted({str(w) for w in self.stop_words})))
        for name in ("min_df", "max_df"):
            v = getattr(self, name)
            ok = isinstance(v, numbers.Number) and not isinstance(v, bool) and (
                v >= 0 if isinstance(v, numbers.Integral) else 0.0 <= v <= 1.0)
            if not ok:
                raise SqlnbError(f"{name} must be a document count (int >= 0) or a share in [0, 1], not {v!r}")
        for name in ("max_features", "select_k"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0):
                raise SqlnbError(f"{name} must be a positive integer, not {v!r}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["stop_words"] = list(self.stop_words)
        return d


_OPTION_NAMES = set(TextOptions.__dataclass_fields__)


def options_for(text: Any, column: str) -> TextOptions:
    """The options of ``column`` from ``text``: None, a :class:`TextOptions`, a dict of
    options, or a mapping of column name to either."""
    if not text:
        return TextOptions()
    if isinstance(text, TextOptions):
        return text
    if not isinstance(text, Mapping):
        raise SqlnbError(f"text options must be a TextOptions or a dict, not {type(text).__name__}")
    if text and set(text) <= _OPTION_NAMES:
        return TextOptions(**text)
    per = text.get(column)
    if per is None:
        unknown = sorted(set(text) - _OPTION_NAMES)
        if unknown and all(isinstance(v, (Mapping, TextOptions)) for v in text.values()):
            return TextOptions()
        raise SqlnbError(f"unknown text option {unknown[0]!r}; options are: {', '.join(sorted(_OPTION_NAMES))}")
    return options_for(per, column)


def _is_text(sql_type: str) -> bool:
    return sql_type.upper().startswith(("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR"))


def bag_layout(sql_type: str) -> str | None:
    """``text``, ``list`` or ``map`` for a column type that can be a bag; else None."""
    t = sql_type.strip()
    if t.endswith("[]"):
        return "list" if _is_text(t[:-2]) else None
    if t.upper().startswith("MAP(") and t.endswith(")"):
        key, _, value = t[4:-1].partition(",")
        return "map" if _is_text(key.strip()) and is_numeric(value.strip()) else None
    return "text" if _is_text(t) else None


def bag_feature(name: str, kind: str, sql_type: str, threshold: float, text: Any = None,
                layout: str | None = None, **extra) -> Feature:
    """A :class:`Feature` for a bag column (``layout`` from its type unless given)."""
    layout = layout or bag_layout(sql_type)
    if layout is None:
        raise SqlnbError(
            f"column {name!r} has type {sql_type}, which is not a bag of tokens; kind {kind!r} "
            "takes text (VARCHAR), VARCHAR[] or MAP(VARCHAR, <number>) columns, or numbers")
    if threshold < 0:
        raise SqlnbError(f"the Bernoulli threshold of bag {name!r} must be >= 0 (absent terms count 0), "
                         f"not {threshold!r}")
    opts = options_for(text, name)
    return Feature(name, kind, sql_type, float(threshold), bag={"layout": layout, **extra, **opts.to_dict()})


def _opts(feature: Feature) -> TextOptions:
    return TextOptions(**{k: (tuple(v) if k == "stop_words" else v)
                          for k, v in feature.bag.items() if k in _OPTION_NAMES})


# -- SQL pieces ------------------------------------------------------------------------------


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _sub(select: exp.Select, alias: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=sql.ident(alias)))


def token_list(feature: Feature, table: str = "src") -> exp.Expression:
    """The tokens of a text or LIST bag as a DuckDB list expression."""
    x: exp.Expression = sql.col(feature.name, table)
    if feature.bag["layout"] != "text":
        return x
    if feature.bag.get("lowercase", True):
        x = exp.Lower(this=x)
    return _fn("regexp_extract_all", x, exp.Literal.string(feature.bag["token_pattern"]))


def _counted(feature: Feature) -> exp.Select:
    """One row per distinct token of the current document: ``token``, ``n`` (its count)."""
    if feature.bag["layout"] == "map":
        m = sql.col(feature.name, "src")
        return exp.select(exp.alias_(_fn("unnest", _fn("map_keys", m)), "token", quoted=True),
                          exp.alias_(_fn("unnest", _fn("map_values", m.copy())), "n", quoted=True))
    # list_aggr(tokens, 'histogram') is a MAP token -> count per document, computed on the
    # list itself (no per-document GROUP BY; measured fastest of the three spellings).
    h = sql.col("h", "h")
    inner = exp.select(exp.alias_(_fn("list_aggr", token_list(feature), exp.Literal.string("histogram")),
                                  "h", quoted=True))
    return exp.select(exp.alias_(_fn("unnest", _fn("map_keys", h)), "token", quoted=True),
                      exp.alias_(_fn("unnest", _fn("map_values", h.copy())), "n", quoted=True)).from_(_sub(inner, "h"))


def _lateral(select: exp.Select, alias: str) -> exp.Join:
    return exp.Join(this=exp.Lateral(this=exp.Subquery(this=select), alias=exp.TableAlias(this=sql.ident(alias))),
                    kind="CROSS")


def _not_null(e: exp.Expression) -> exp.Expression:
    return exp.Not(this=exp.Is(this=e, expression=exp.Null()))


# -- fitting -------------------------------------------------------------------------------


def _aggregate_columns(k: exp.Expression, n: exp.Expression, w: exp.Expression | None,
                       threshold: float) -> list[exp.Expression]:
    """Per (label, token): ``total`` Σw·n, ``docs`` Σw·[n > t], ``least`` min(n), and for
    pruning the unweighted ``df`` (documents with n > 0) and ``utotal`` Σn — left out when
    they equal ``docs``/``total`` (unweighted, t = 0): each aggregate costs ~10 % of the
    statement at 13.6M rows."""
    n = sql.as_double(n)
    present = exp.GT(this=n.copy(), expression=sql.dbl(threshold))
    total = exp.Sum(this=n.copy() if w is None else exp.Mul(this=w.copy(), expression=n.copy()))
    cols = [
        exp.alias_(k, "k", quoted=True),
        exp.alias_(total, "total", quoted=True),
        exp.alias_(wcount(w, present), "docs", quoted=True),
        exp.alias_(exp.Min(this=n.copy()), "least", quoted=True),
    ]
    if w is not None or threshold != 0.0:
        cols.append(exp.alias_(wcount(None, exp.GT(this=n.copy(), expression=sql.dbl(0.0))), "df", quoted=True))
    if w is not None:
        cols.append(exp.alias_(exp.Sum(this=n.copy()), "utotal", quoted=True))
    return cols


def wide_counts_query(source, label: str, weight: str | None, feature: Feature,
                      where: exp.Expression | None = None) -> exp.Select:
    """``GROUP BY label, token`` over the unnested bag of a text, LIST or MAP column
    (of the rows meeting ``where``, e.g. one cross-validation fold)."""
    w = sql.as_double(sql.col(weight, "src")) if weight else None
    token = sql.col("token", "u")
    cols = _aggregate_columns(sql.col(label, "src"), sql.col("n", "u"), w, feature.threshold)
    cols.insert(1, exp.alias_(token.copy(), "token", quoted=True))
    q = exp.select(*cols).from_(source.from_("src"))
    q.append("joins", _lateral(_counted(feature), "u"))
    cond = _where(sql.col(label, "src"), token, feature)
    if where is not None:
        cond = exp.and_(cond, where)
    return q.where(cond).group_by(sql.col(label, "src"), token.copy())


def long_counts_query(tokens, labels, feature: Feature, label: str, weight: str | None) -> exp.Select:
    """``GROUP BY label, token`` over a long token table joined to its labels by id."""
    b = feature.bag
    t = _long_rows(tokens, feature)
    w = sql.as_double(sql.col(weight, "l")) if weight else None
    token = sql.col("token", "t")
    cols = _aggregate_columns(sql.col(label, "l"), sql.col("n", "t"), w, feature.threshold)
    cols.insert(1, exp.alias_(token.copy(), "token", quoted=True))
    return (exp.select(*cols).from_(t)
            .join(labels.from_("l"), on=exp.EQ(this=sql.col("id", "t"), expression=sql.col(b["id"], "l")))
            .where(_where(sql.col(label, "l"), token, feature))
            .group_by(sql.col(label, "l"), token.copy()))


def _long_rows(tokens, feature: Feature, alias: str = "t") -> exp.Subquery:
    """The token table as ``(id, token, n)`` aliased ``alias``. Without a count column every
    row is one occurrence: rows are counted per (id, token)."""
    b = feature.bag
    if b.get("count"):
        sel = exp.select(exp.alias_(sql.col(b["id"], "src"), "id", quoted=True),
                         exp.alias_(sql.col(b["token"], "src"), "token", quoted=True),
                         exp.alias_(sql.col(b["count"], "src"), "n", quoted=True)).from_(tokens.from_("src"))
    else:
        sel = (exp.select(exp.alias_(sql.col(b["id"], "src"), "id", quoted=True),
                          exp.alias_(sql.col(b["token"], "src"), "token", quoted=True),
                          exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True))
               .from_(tokens.from_("src")).group_by(sql.col(b["id"], "src"), sql.col(b["token"], "src")))
    return _sub(sel, alias)


def _where(label: exp.Expression, token: exp.Expression, feature: Feature) -> exp.Expression:
    cond = exp.and_(_not_null(label), _not_null(token.copy()))
    stop = feature.bag.get("stop_words") or []
    if stop:
        cond = exp.and_(cond, exp.Not(this=exp.In(this=token.copy(),
                                                  expressions=[exp.Literal.string(s) for s in stop])))
    return cond


def pruned_query(counts: exp.Select, opts: TextOptions, n_docs: float) -> exp.Select:
    """Keep the vocabulary ``CountVectorizer`` would (module docstring), in SQL."""
    def bound(v):
        return float(v) if isinstance(v, numbers.Integral) else float(v) * n_docs
    names = {e.alias_or_name for e in counts.expressions}
    df = exp.Sum(this=sql.col("df" if "df" in names else "docs"))
    vocab = (exp.select(sql.col("token")).from_(sql.table("agg")).group_by(sql.col("token"))
             .having(exp.and_(exp.GTE(this=df, expression=sql.dbl(bound(opts.min_df))),
                              exp.LTE(this=df.copy(), expression=sql.dbl(bound(opts.max_df))))))
    if opts.max_features is not None:
        vocab = vocab.order_by(exp.Ordered(this=exp.Sum(this=sql.col("utotal" if "utotal" in names else "total")),
                                           desc=True),
                               exp.Ordered(this=sql.col("token"))).limit(opts.max_features)
    least = exp.Subquery(this=exp.select(exp.Min(this=sql.col("least"))).from_(sql.table("agg")))
    return (exp.select(sql.col("k"), sql.col("token"), sql.col("total"), sql.col("docs"),
                       exp.alias_(least, "least", quoted=True))
            .from_(sql.table("agg"))
            .where(exp.In(this=sql.col("token"), query=exp.Subquery(this=vocab)))
            .with_(sql.ident("agg"), as_=counts))


def _duckdb(engine) -> duckdb.DuckDBPyConnection:
    con = getattr(engine, "con", engine)
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise SqlnbError("token bags (text, LIST, MAP columns) are fitted and scored in DuckDB only; "
                         "give a DuckDB connection")
    return con


def _keeps_every_term(opts: "TextOptions") -> bool:
    """Whether the pruning options keep every term with a non-zero document frequency."""
    return (opts.max_features is None and isinstance(opts.min_df, numbers.Integral) and opts.min_df <= 1
            and not isinstance(opts.max_df, numbers.Integral) and opts.max_df >= 1.0)


def bag_statistics(con, counts: exp.Select, feature: Feature, classes: list, n: np.ndarray,
                   rows: np.ndarray, where: str) -> Bag:
    """Run ``counts`` (pruned) and gather a :class:`Bag`; apply ``select_k``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    opts = _opts(feature)
    if _keeps_every_term(opts):
        # CountVectorizer's defaults (min_df=1, max_df=1.0, no max_features) keep every
        # term that occurs in a document: no second GROUP BY token in SQL (~20 % of the
        # fit at 13.6M token rows); terms with df = 0 (only zero counts) are dropped here.
        table = _duckdb(con).sql(sql.render(counts)).to_arrow_table()
        least = pc.min(table["least"]).as_py() if table.num_rows else None  # over all rows, as in SQL
        df = table["df" if "df" in table.column_names else "docs"]
        if opts.min_df >= 1 and table.num_rows:
            seen = pc.unique(pc.filter(table["token"], pc.greater(df, 0)))
            table = table.filter(pc.is_in(table["token"], value_set=seen))
        table = table.select(["k", "token", "total", "docs"]).append_column("least", pa.array([least] * table.num_rows, pa.float64()))
    else:
        table = _duckdb(con).sql(sql.render(pruned_query(counts, opts, float(np.sum(rows))))).to_arrow_table()
    if table.num_rows == 0:
        raise SqlnbError(f"bag {feature.name!r} in {where} has no term left (no token, or min_df/max_df "
                         "pruned them all); check the data, token_pattern and min_df")
    least = table["least"][0].as_py()
    if least is not None and least < 0:
        raise SqlnbError(f"bag {feature.name!r} in {where} has a negative count ({least}); "
                         "token counts must be >= 0")
    terms = pc.unique(table["token"]).sort()
    labels = table["k"].dictionary_encode().combine_chunks()
    index = {v: i for i, v in enumerate(classes)}
    kpos = np.array([index.get(v, -1) for v in labels.dictionary.to_pylist()])[labels.indices.to_numpy()]
    tpos = pc.index_in(table["token"], value_set=terms).to_numpy(zero_copy_only=False)
    K, V = len(classes), len(terms)
    total, docs = np.zeros((K, V)), np.zeros((K, V))
    keep = kpos >= 0
    total[kpos[keep], tpos[keep]] = table["total"].to_numpy(zero_copy_only=False)[keep]
    docs[kpos[keep], tpos[keep]] = table["docs"].to_numpy(zero_copy_only=False)[keep]
    if not np.all(np.isfinite(total)):
        raise SqlnbError(f"bag {feature.name!r} in {where} has NaN or infinite counts; replace them with 0")
    bag = Bag(terms.to_pylist(), np.asarray(n, float), np.asarray(rows, float), total, docs)
    if opts.select_k is not None and opts.select_k < len(bag.terms):
        mi = mutual_information(bag, con=_duckdb(con))
        bag = bag.keep_terms(mi["term"].to_pylist()[:opts.select_k])
    return bag


class BagFamily(Family):
    """The family-side hooks of a bag feature (whatever its kind): its document counts in
    the wide scan, and its score term and LATERAL join (see the module docstring)."""

    name = "bag"

    def aggregates(self, feature, weight):
        x = sql.col(feature.name, "src")
        return [wcount(weight, _not_null(x)), exp.Count(this=x.copy())]

    def collect(self, feature, rows, classes, where):
        n = np.array([float(r[0] or 0) for r in rows])
        return Bag([], n, np.array([float(r[1] or 0) for r in rows]), np.zeros((len(n), 0)), np.zeros((len(n), 0)))

    # -- scoring ----------------------------------------------------------------------------
    @staticmethod
    def alias(feature) -> str:
        return f"bag {feature.name}"

    def join(self, feature, params) -> exp.Join:
        if feature.bag["layout"] == "long":
            raise SqlnbError(f"this model was fitted on a long token table ({feature.name!r}); "
                             "score it with model.score_long(tokens, docs)")
        return _lateral(bag_sums(feature, params, _scoring_rows(feature)), self.alias(feature))

    def term(self, feature, params, k):
        s = exp.Coalesce(this=sql.col(f"s{k}", self.alias(feature)), expressions=[sql.dbl(0.0)])
        if feature.kind != "bernoulli":
            return s
        # Bernoulli: const_c + Σ_present (flp − neg) for every non-NULL bag. A class with
        # m_c terms of θ = 1 (MLE only) has neg = −inf there: the document must hold all
        # of them, else its score is −inf (never −inf + inf = NaN).
        body: exp.Expression = exp.Add(this=sql.dbl(float(params.const[k])), expression=s)
        if params.m[k] > 0:
            hits = exp.Coalesce(this=sql.col(f"i{k}", self.alias(feature)), expressions=[sql.dbl(0.0)])
            body = exp.Case(ifs=[exp.If(this=exp.LT(this=hits, expression=sql.dbl(float(params.m[k]))),
                                        true=sql.dbl(_NEG_INF))], default=body)
        if feature.bag["layout"] == "long":
            return body
        return exp.Case(ifs=[exp.If(this=exp.Is(this=sql.col(feature.name, "src"), expression=exp.Null()),
                                    true=sql.dbl(0.0))], default=body)


BAG = BagFamily()


def family_for(feature: Feature) -> Family:
    """The object providing ``feature``'s aggregates, score term and join."""
    return BAG if feature.bag is not None else REGISTRY[feature.kind]


# -- parameters ------------------------------------------------------------------------------


@dataclass
class BagParams:
    """Scoring parameters of a bag: per term and class the weight ``w[c, v]`` a present
    token adds (times its count for multinomial/complement); Bernoulli's per-class
    constant and the count ``m`` of terms whose absence is impossible (neg = −inf)."""

    terms: list
    w: np.ndarray
    const: np.ndarray
    m: np.ndarray
    inf_terms: np.ndarray | None = None  # bool (K, V): neg = −inf


def prepare(feature: Feature, raw: Any, stats: Bag) -> BagParams:
    """:class:`BagParams` from the family's estimate (flp / w matrices)."""
    K = len(stats.n)
    if feature.kind != "bernoulli":
        return BagParams(list(stats.terms), np.asarray(raw, float), np.zeros(K), np.zeros(K, int))
    flp, neg = (np.asarray(a, float) for a in raw)
    finite = np.isfinite(neg)
    with np.errstate(invalid="ignore"):
        w = np.where(finite, flp - neg, flp)  # flp = −inf stays −inf; never inf − inf
    const = np.where(finite, neg, 0.0).sum(axis=1)
    m = (~finite).sum(axis=1)
    return BagParams(list(stats.terms), w, const, m, ~finite if m.any() else None)


def _packed(values: Sequence[Any], to: str) -> exp.Expression:
    """``unnest(CAST(CAST('<json array>' AS JSON) AS <to>[]))`` (see the module docstring)."""
    lit = exp.Cast(this=exp.Literal.string(json.dumps(list(values), ensure_ascii=False, allow_nan=False)),
                   to=exp.DataType.build("json", dialect="duckdb"))
    return _fn("unnest", exp.Cast(this=lit, to=exp.DataType.build(f"{to}[]", dialect="duckdb")))


def parameter_rows(params: BagParams) -> exp.Subquery:
    """One row per term: ``token, c0 … c{K−1}`` (and ``i0 …`` flags), aliased ``p``."""
    K = params.w.shape[0]
    cols = [exp.alias_(_packed(params.terms, "varchar"), "token", quoted=True)]
    outer = [sql.col("token")]
    for k in range(K):
        row = params.w[k]
        finite = np.isfinite(row)
        cols.append(exp.alias_(_packed([float(x) if f else None for x, f in zip(row, finite)], "double"),
                               f"c{k}", quoted=True))
        c = sql.col(f"c{k}")
        outer.append(c if finite.all() else
                     exp.alias_(exp.Coalesce(this=c, expressions=[sql.dbl(_NEG_INF)]), f"c{k}", quoted=True))
    if params.inf_terms is not None:
        for k in range(K):
            cols.append(exp.alias_(_packed(params.inf_terms[k].astype(float).tolist(), "double"),
                                   f"i{k}", quoted=True))
            outer.append(sql.col(f"i{k}"))
    return _sub(exp.select(*outer).from_(_sub(exp.select(*cols), "packed")), "p")


def _scoring_rows(feature: Feature) -> tuple[exp.Expression, bool]:
    """The current document's tokens as a FROM item aliased ``u`` and whether it has a
    count column ``n`` (else each row counts once)."""
    b = feature.bag
    if b["layout"] == "map" or (feature.kind == "bernoulli" and feature.threshold >= 1):
        return _sub(_counted(feature), "u"), True
    tokens = token_list(feature)
    if feature.kind == "bernoulli":  # presence: each distinct token once
        tokens = _fn("list_distinct", tokens)
    return _sub(exp.select(exp.alias_(_fn("unnest", tokens), "token", quoted=True)), "u"), False


def parameter_table(con, params: BagParams) -> exp.Expression:
    """The parameter rows as a DuckDB temporary table, aliased ``p`` (the in-database path:
    no literal to parse; the table lives as long as the connection). A native table, not a
    registered Arrow view: the 20-class join and grouping over 13.6M token rows took 11.2 s
    against a table and 16.7 s against the Arrow view (same run, load ≈ 7)."""
    import uuid

    import pyarrow as pa
    cols = {"token": pa.array(params.terms, pa.string())}
    cols.update({f"c{k}": params.w[k] for k in range(params.w.shape[0])})
    if params.inf_terms is not None:
        cols.update({f"i{k}": params.inf_terms[k].astype(float) for k in range(params.w.shape[0])})
    name = f"sqlnb_bag_params_{uuid.uuid4().hex[:12]}"
    con = _duckdb(con)
    con.register(name + "_arrow", pa.table(cols))
    try:
        con.execute(sql.render(exp.Create(this=sql.table(name), kind="TABLE", properties=exp.Properties(
            expressions=[exp.TemporaryProperty()]), expression=exp.select(exp.Star()).from_(sql.table(name + "_arrow"))))).fetchall()
    finally:
        con.unregister(name + "_arrow")
    return exp.alias_(sql.table(name), "p", table=True, quoted=True)


def bag_sums(feature: Feature, params: BagParams, rows: tuple[exp.Expression, bool],
             group: exp.Expression | None = None, table: exp.Expression | None = None) -> exp.Select:
    """``SELECT [group,] Σ n·c_k AS s_k … FROM rows JOIN parameters`` for one bag
    (``table``: a registered parameter table instead of the inlined rows)."""
    frm, counted = rows
    n = sql.as_double(sql.col("n", "u")) if counted else None
    bern = feature.kind == "bernoulli"
    cols = []
    for k in range(params.w.shape[0]):
        c = sql.col(f"c{k}", "p")
        cols.append(exp.alias_(exp.Sum(this=c if n is None or bern else exp.Mul(this=n.copy(), expression=c)),
                               f"s{k}", quoted=True))
    if params.inf_terms is not None:
        cols += [exp.alias_(exp.Sum(this=sql.col(f"i{k}", "p")), f"i{k}", quoted=True)
                 for k in range(params.w.shape[0])]
    if group is not None:
        cols.insert(0, exp.alias_(group, "id", quoted=True))
    q = exp.select(*cols).from_(frm).join(table if table is not None else parameter_rows(params),
                                          on=exp.EQ(this=sql.col("token", "u"), expression=sql.col("token", "p")))
    if n is not None:
        # Only present tokens: a zero (or NULL) count adds nothing, and 0·(−inf) is NaN.
        q = q.where(exp.GT(this=n.copy(), expression=sql.dbl(feature.threshold if bern else 0.0)))
    if group is not None:
        q = q.group_by(group.copy())
    return q


# -- long layout -----------------------------------------------------------------------------


def long_scoring_query(model, tokens, docs, outputs, keep, con=None) -> exp.Select:
    """Score the documents of ``docs`` (a source with the id column) from ``tokens``.

    With ``con`` the parameter rows are a table registered there (:func:`parameter_table`);
    without, they are inlined and the SELECT is self-contained (export)."""
    from sqlnb.models.finish import scoring_select

    (feature,) = [f for f in model.features if f.bag is not None]
    b = feature.bag
    params = model.log_parameters()[feature.name]
    table = parameter_table(con, params) if con is not None else None
    summed = bag_sums(feature, params, (_long_rows(tokens, feature, "u"), True), group=sql.col("id", "u"),
                      table=table)
    alias = BAG.alias(feature)
    join = exp.Join(this=_sub(summed, alias), side="LEFT",
                    on=exp.EQ(this=sql.col(b["id"], "src"), expression=sql.col("id", alias)))
    if keep is not None:
        docs.require(keep, "column to keep")
    return scoring_select(docs.from_("src"), model.class_scores(), model.classes, model.label_type,
                          list(docs.columns), outputs, keep, joins=[join])


def resolve_long(con, data: Any, feature: Feature, docs: bool = False):
    """Resolve a token table (or, with ``docs``, a document table) for a long bag."""
    from sqlnb.source import resolve
    src = resolve(data, _duckdb(con))
    b = feature.bag
    need = [b["id"]] if docs else [b["id"], b["token"]] + ([b["count"]] if b.get("count") else [])
    src.require(need, "document table column" if docs else "token table column")
    return src


def collect_bags(engine, source, label: str, weight: str | None, features: Sequence[Feature],
                 classes: list, feats: dict, where: exp.Expression | None = None) -> None:
    """Fill the per-term statistics of the bag columns (after the wide scan gave their
    document counts): one ``GROUP BY label, token`` statement per bag, over the rows
    meeting ``where`` (a cross-validation fold; default all). With pruning options each
    call prunes its own rows' vocabulary, so merged folds hold the union of those."""
    for f in features:
        if f.bag is None:
            continue
        partial = feats[f.name]
        feats[f.name] = bag_statistics(engine, wide_counts_query(source, label, weight, f, where), f, classes,
                                       partial.n, partial.rows, source.description)


# -- mutual information and top terms --------------------------------------------------------


def _stats_of(model_or_bag: Any, feature: str | None) -> tuple[Bag, list]:
    if isinstance(model_or_bag, Bag):
        return model_or_bag, list(range(len(model_or_bag.n)))
    bags = [f.name for f in model_or_bag.features if f.bag is not None]
    if not bags:
        raise SqlnbError("this model has no token bag (text, LIST or MAP feature)")
    name = feature if feature is not None else bags[0]
    if name not in bags:
        raise SqlnbError(f"{name!r} is not a token bag of this model; its bags are: {', '.join(bags)}")
    return model_or_bag.stats.features[name], list(model_or_bag.classes)


@contextmanager
def _registered(con, bag: Bag) -> Iterator[dict]:
    """The bag's statistics registered in ``con`` as Arrow tables (names by part) while
    the block runs."""
    import uuid

    import pyarrow as pa
    ks, vs = np.nonzero(bag.docs)
    names = {p: f"sqlnb_bag_{p}_{uuid.uuid4().hex[:8]}" for p in ("classes", "terms", "docs")}
    con.register(names["classes"], pa.table({"class_index": np.arange(len(bag.n), dtype=np.int32),
                                             "n": np.asarray(bag.n, float)}))
    con.register(names["terms"], pa.table({"term_index": np.arange(len(bag.terms), dtype=np.int32),
                                           "term": pa.array(bag.terms, pa.string())}))
    con.register(names["docs"], pa.table({"class_index": ks.astype(np.int32), "term_index": vs.astype(np.int32),
                                          "docs": bag.docs[ks, vs]}))
    try:
        yield names
    finally:
        for name in names.values():
            con.unregister(name)


def _cells_query(names: dict) -> exp.Select:
    """Per (term, class with documents): π_c, θ_jc = docs/N_c (MLE, document presence)
    and θ_j = Σ_c π_c θ_jc."""
    cls = exp.select(sql.col("class_index"), sql.col("n"),
                     exp.alias_(exp.Div(this=sql.col("n"), expression=exp.Window(
                         this=exp.Sum(this=sql.col("n")))), "pi", quoted=True)
                     ).from_(sql.table(names["classes"])).where(exp.GT(this=sql.col("n"), expression=sql.dbl(0.0)))
    theta = exp.Div(this=exp.Coalesce(this=sql.col("docs", "d"), expressions=[sql.dbl(0.0)]),
                    expression=sql.col("n", "c"))
    cells = (exp.select(sql.col("term_index", "t"), sql.col("term", "t"), sql.col("class_index", "c"),
                        sql.col("pi", "c"), exp.alias_(theta, "theta", quoted=True))
             .from_(exp.alias_(sql.table(names["terms"]), "t", table=True, quoted=True))
             .join(_sub(cls, "c"), join_type="CROSS")
             .join(exp.alias_(sql.table(names["docs"]), "d", table=True, quoted=True), join_type="LEFT",
                   on=exp.and_(exp.EQ(this=sql.col("term_index", "d"), expression=sql.col("term_index", "t")),
                               exp.EQ(this=sql.col("class_index", "d"), expression=sql.col("class_index", "c")))))
    marginal = exp.Window(this=exp.Sum(this=exp.Mul(this=sql.col("pi"), expression=sql.col("theta"))),
                          partition_by=[sql.col("term_index")])
    return exp.select(exp.Star(), exp.alias_(marginal, "theta_j", quoted=True)).from_(_sub(cells, "cells"))


def _mi_part() -> exp.Expression:
    """π_c [θ ln(θ/θ_j) + (1−θ) ln((1−θ)/(1−θ_j))], with 0·ln 0 = 0."""
    one = sql.dbl(1.0)
    th, tj, pi = sql.col("theta"), sql.col("theta_j"), sql.col("pi")
    present = exp.Case(ifs=[exp.If(this=exp.GT(this=th.copy(), expression=sql.dbl(0.0)),
                                   true=exp.Mul(this=th.copy(), expression=exp.Ln(this=exp.Div(this=th.copy(), expression=tj.copy()))))],
                       default=sql.dbl(0.0))
    not_th = sql.paren(exp.Sub(this=one.copy(), expression=th.copy()))
    not_tj = sql.paren(exp.Sub(this=one.copy(), expression=tj.copy()))
    absent = exp.Case(ifs=[exp.If(this=exp.LT(this=th.copy(), expression=one.copy()),
                                  true=exp.Mul(this=not_th, expression=exp.Ln(this=exp.Div(this=not_th.copy(), expression=not_tj))))],
                      default=sql.dbl(0.0))
    return exp.Mul(this=pi, expression=sql.paren(exp.Add(this=present, expression=absent)))


def mutual_information(model: Any, feature: str | None = None, con=None):
    """Mutual information (nats) between each vocabulary term's presence and the class.

    ``I(X_j; Y) = Σ_c [θ_jc π_c ln(θ_jc/θ_j) + (1−θ_jc) π_c ln((1−θ_jc)/(1−θ_j))]`` with
    ``θ_jc`` the share of class-c documents holding term j, ``π_c`` the class share of
    documents and ``θ_j = Σ_c π_c θ_jc`` (seeds/000, "Feature selection"). Computed in
    SQL from the stored statistics (weighted when the fit was).

    Parameters
    ----------
    model : NaiveBayes or Bag
    feature : str, optional
        The bag (default: the model's first).
    con : DuckDB connection, optional

    Returns
    -------
    pyarrow.Table
        ``term``, ``mi``, most informative first (ties: term order).
    """
    bag, _ = _stats_of(model, feature)
    con = _duckdb(con) if con is not None else duckdb.connect()
    with _registered(con, bag) as names:
        q = (exp.select(sql.col("term"), exp.alias_(exp.Sum(this=_mi_part()), "mi", quoted=True))
             .from_(_sub(_cells_query(names), "cells")).group_by(sql.col("term"))
             .order_by(exp.Ordered(this=sql.col("mi"), desc=True), exp.Ordered(this=sql.col("term"))))
        return con.sql(sql.render(q)).to_arrow_table()


def top_terms(model: Any, feature: str | None = None, n: int = 10, con=None):
    """The ``n`` terms that most indicate each class (for ``sqlnb show``).

    A term indicates class c when its document share there exceeds the overall one
    (θ_jc > θ_j); such terms are ranked by class c's part of the mutual information,
    ``π_c [θ_jc ln(θ_jc/θ_j) + (1−θ_jc) ln((1−θ_jc)/(1−θ_j))]``.

    Returns
    -------
    pyarrow.Table
        ``class`` (label), ``rank`` (1 = strongest), ``term``, ``mi_part``, ``doc_share``
        (θ_jc) and ``overall_share`` (θ_j).
    """
    import pyarrow as pa

    bag, classes = _stats_of(model, feature)
    con = _duckdb(con) if con is not None else duckdb.connect()
    with _registered(con, bag) as names:
        part = _mi_part()
        rank = exp.Window(this=exp.RowNumber(), partition_by=[sql.col("class_index")],
                          order=exp.Order(expressions=[exp.Ordered(this=part.copy(), desc=True),
                                                       exp.Ordered(this=sql.col("term"))]))
        inner = (exp.select(sql.col("class_index"), exp.alias_(rank, "rank", quoted=True), sql.col("term"),
                            exp.alias_(part, "mi_part", quoted=True), exp.alias_(sql.col("theta"), "doc_share", quoted=True),
                            exp.alias_(sql.col("theta_j"), "overall_share", quoted=True))
                 .from_(_sub(_cells_query(names), "cells"))
                 .where(exp.GT(this=sql.col("theta"), expression=sql.col("theta_j"))))
        q = (exp.select(exp.Star()).from_(_sub(inner, "ranked"))
             .where(exp.LTE(this=sql.col("rank"), expression=exp.Literal.number(int(n))))
             .order_by(sql.col("class_index"), sql.col("rank")))
        t = con.sql(sql.render(q)).to_arrow_table()
    labels = [classes[i] for i in t["class_index"].to_pylist()]
    return pa.table({"class": labels, **{c: t[c] for c in ("rank", "term", "mi_part", "doc_share", "overall_share")}})


# -- storage ---------------------------------------------------------------------------------


def bag_tables(j: int, bag: Bag) -> dict:
    """Parameter-table parts of bag feature ``j``: ``bag_<j>_terms`` (term_index, term),
    ``bag_<j>_docs`` (class_index, n, rows) and ``bag_<j>_counts`` (class_index,
    term_index, total, docs; non-zero cells only)."""
    import pyarrow as pa
    ks, vs = np.nonzero((bag.total != 0) | (bag.docs != 0))
    K = len(bag.n)
    return {
        f"bag_{j}_terms": (pa.table({"term_index": pa.array(range(len(bag.terms)), pa.int32()),
                                     "term": pa.array(bag.terms, pa.string())}), {}),
        f"bag_{j}_docs": (pa.table({"class_index": pa.array(range(K), pa.int32()),
                                    "n": pa.array(bag.n, pa.float64()), "rows": pa.array(bag.rows, pa.float64())}), {}),
        f"bag_{j}_counts": (pa.table({"class_index": pa.array(ks, pa.int32()), "term_index": pa.array(vs, pa.int32()),
                                      "total": pa.array(bag.total[ks, vs], pa.float64()),
                                      "docs": pa.array(bag.docs[ks, vs], pa.float64())}), {}),
    }


def bag_from_tables(j: int, tables: dict, K: int) -> Bag:
    """Inverse of :func:`bag_tables`."""
    terms = tables[f"bag_{j}_terms"].sort_by("term_index")["term"].to_pylist()
    d = tables[f"bag_{j}_docs"].sort_by("class_index")
    c = tables[f"bag_{j}_counts"]
    total, docs = np.zeros((K, len(terms))), np.zeros((K, len(terms)))
    ks, vs = c["class_index"].to_numpy(), c["term_index"].to_numpy()
    total[ks, vs] = c["total"].to_numpy()
    docs[ks, vs] = c["docs"].to_numpy()
    return Bag(terms, d["n"].to_numpy().astype(float), d["rows"].to_numpy().astype(float), total, docs)
