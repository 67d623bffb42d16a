"""Tokenizing a bag: options, token patterns, stop words, text types and the SQL pieces.

:class:`TextOptions` say how a text column is tokenized and its vocabulary pruned;
:func:`token_list` and ``_counted`` spell the current document's tokens (and counts)
of a text, LIST or MAP column in DuckDB SQL.

The module docstring the code below refers to is the package's,
:mod:`sqlnb.models.naive_bayes.text`.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.families import Feature

#: RE2 spelling of scikit-learn's ``(?u)\b\w\w+\b`` (see the module docstring).
DEFAULT_TOKEN_PATTERN = r"[\pL\pN_]{2,}"
SKLEARN_TOKEN_PATTERN = r"(?u)\b\w\w+\b"


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


# -- the connection -------------------------------------------------------------------------


def _duckdb(engine) -> duckdb.DuckDBPyConnection:
    con = getattr(engine, "con", engine)
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise SqlnbError("token bags (text, LIST, MAP columns) are fitted and scored in DuckDB only; "
                         "give a DuckDB connection")
    return con
