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

The package, lowest first (each module imports only those above it):
:mod:`~sqlnb.models.naive_bayes.text.tokens` (options, token patterns, the SQL pieces),
:mod:`~sqlnb.models.naive_bayes.text.terms` (mutual information, top terms),
:mod:`~sqlnb.models.naive_bayes.text.params` (parameter rows and sums),
:mod:`~sqlnb.models.naive_bayes.text.bags` (statistics, pruning, the bag family, storage)
and :mod:`~sqlnb.models.naive_bayes.text.long` (the long layout).
"""

from sqlnb.models.naive_bayes.families import is_numeric  # noqa: F401  (sqlnb.api uses text.is_numeric)
from sqlnb.models.naive_bayes.text.bags import (BAG, BAG_KINDS, BagFamily, bag_feature, bag_from_tables, bag_layout,
                                                bag_statistics, bag_tables, collect_bags, family_for, pruned_query,
                                                wide_counts_query)
from sqlnb.models.naive_bayes.text.long import first_token_docs, long_counts_query, long_scoring_query, resolve_long
from sqlnb.models.naive_bayes.text.params import BagParams, bag_sums, parameter_rows, parameter_table, prepare
from sqlnb.models.naive_bayes.text.terms import mutual_information, top_terms
from sqlnb.models.naive_bayes.text.tokens import (DEFAULT_TOKEN_PATTERN, SKLEARN_TOKEN_PATTERN, TextOptions,
                                                  _duckdb, options_for, token_list)

__all__ = [
    "BAG", "BAG_KINDS", "BagFamily", "BagParams", "DEFAULT_TOKEN_PATTERN", "SKLEARN_TOKEN_PATTERN", "TextOptions",
    "bag_feature", "bag_from_tables", "bag_layout", "bag_statistics", "bag_sums", "bag_tables", "collect_bags",
    "family_for", "long_counts_query", "long_scoring_query", "mutual_information", "options_for", "parameter_rows",
    "parameter_table", "prepare", "pruned_query", "resolve_long", "token_list", "top_terms", "wide_counts_query",
]
