"""Access to the real UCI datasets kept outside the repository.

The datasets live read-only in ``<repo root>/../shared/data`` (see the README there). They are
never copied into the repository: tests call :func:`require_shared_data`, which skips with a
clear reason when the folder is absent -- except on CI (environment variable ``CI`` set), where
the data is always present and its absence is a failure.

Two views of every dataset, built from the *same* DuckDB query so that both sides see identical
values:

* SQL: ``<dataset>_query()`` / :func:`query` return a sqlglot expression tree (DuckDB dialect,
  all identifiers quoted); :func:`render` turns it into SQL text and :func:`relation` into a
  DuckDB relation.
* numpy (for the scikit-learn oracle): :func:`numpy_dataset` runs the query, fetches it through
  Arrow, and returns numeric matrices, ordinal-encoded categorical codes (with the category
  lists) or raw texts, plus the labels.

Dataset names accepted by :func:`query` and :func:`numpy_dataset`: ``sms_spam``, ``mushroom``,
``votes``, ``adult_train``, ``adult_test``, ``adult`` (both files, with an ``is_test`` column)
and ``spambase`` (with the ESL train/test split as ``is_test``).

Parsing conventions (all in SQL):

* ``?`` is read as NULL (mushroom, votes, adult).
* adult: fields are split on ``,`` and trimmed (the files use ``", "``); ``adult.test``'s junk
  first line is skipped and the trailing ``.`` of its labels removed; the blank last lines of both
  files produce no rows.
* numeric columns are DOUBLE, categorical ones VARCHAR; spambase's class ``spam`` is INTEGER 0/1.
* sms_spam is read with quoting and escaping off (145 messages contain ``"``).
* Row order is file order. Where a row number is needed (``row_id``, the spambase split join) it
  comes from ``ROW_NUMBER() OVER ()`` directly over a single ``read_csv`` scan, which DuckDB
  documents as preserving insertion order (``preserve_insertion_order``, on by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
import pytest
from sqlglot import exp

from support.ci import in_ci

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT.parent / "shared" / "data"

# ----------------------------------------------------------------------------------------------
# File layout and column names (names taken from the .names files)
# ----------------------------------------------------------------------------------------------

FILES: dict[str, tuple[str, ...]] = {
    "sms_spam": ("sms_spam/SMSSpamCollection",),
    "mushroom": ("mushroom/agaricus-lepiota.data",),
    "votes": ("votes/house-votes-84.data",),
    "adult_train": ("adult/adult.data",),
    "adult_test": ("adult/adult.test",),
    "adult": ("adult/adult.data", "adult/adult.test"),
    "spambase": ("spambase/spambase.data", "spambase/spambase.esl_traintest"),
}
DATASETS: tuple[str, ...] = tuple(FILES)

SMS_COLUMNS = ("label", "text")

MUSHROOM_FEATURES = (
    "cap-shape",
    "cap-surface",
    "cap-color",
    "bruises?",  # spelled with the question mark in agaricus-lepiota.names
    "odor",
    "gill-attachment",
    "gill-spacing",
    "gill-size",
    "gill-color",
    "stalk-shape",
    "stalk-root",
    "stalk-surface-above-ring",
    "stalk-surface-below-ring",
    "stalk-color-above-ring",
    "stalk-color-below-ring",
    "veil-type",
    "veil-color",
    "ring-number",
    "ring-type",
    "spore-print-color",
    "population",
    "habitat",
)
MUSHROOM_COLUMNS = ("class", *MUSHROOM_FEATURES)

VOTES_FEATURES = (
    "handicapped-infants",
    "water-project-cost-sharing",
    "adoption-of-the-budget-resolution",
    "physician-fee-freeze",
    "el-salvador-aid",
    "religious-groups-in-schools",
    "anti-satellite-test-ban",
    "aid-to-nicaraguan-contras",
    "mx-missile",
    "immigration",
    "synfuels-corporation-cutback",
    "education-spending",
    "superfund-right-to-sue",
    "crime",
    "duty-free-exports",
    "export-administration-act-south-africa",
)
VOTES_COLUMNS = ("party", *VOTES_FEATURES)

ADULT_FEATURES = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)
ADULT_COLUMNS = (*ADULT_FEATURES, "income")
ADULT_NUMERIC = (
    "age",
    "fnlwgt",
    "education-num",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)
ADULT_CATEGORICAL = tuple(c for c in ADULT_FEATURES if c not in ADULT_NUMERIC)
ADULT_TRAIN_ROWS = 32561  # rows of adult.data; offset of the test rows' row_id in "adult"

SPAMBASE_FEATURES = (
    *(
        f"word_freq_{w}"
        for w in (
            "make address all 3d our over remove internet order mail receive will people "
            "report addresses free business email you credit your font 000 money hp hpl "
            "george 650 lab labs telnet 857 data 415 85 technology 1999 parts pm direct cs "
            "meeting original project re edu table conference"
        ).split()
    ),
    *(f"char_freq_{c}" for c in ";([!$#"),
    "capital_run_length_average",
    "capital_run_length_longest",
    "capital_run_length_total",
)
SPAMBASE_COLUMNS = (*SPAMBASE_FEATURES, "spam")

LABEL_COLUMN: dict[str, str] = {
    "sms_spam": "label",
    "mushroom": "class",
    "votes": "party",
    "adult_train": "income",
    "adult_test": "income",
    "adult": "income",
    "spambase": "spam",
}
NUMERIC_FEATURES: dict[str, tuple[str, ...]] = {
    "sms_spam": (),
    "mushroom": (),
    "votes": (),
    "adult_train": ADULT_NUMERIC,
    "adult_test": ADULT_NUMERIC,
    "adult": ADULT_NUMERIC,
    "spambase": SPAMBASE_FEATURES,
}
CATEGORICAL_FEATURES: dict[str, tuple[str, ...]] = {
    "sms_spam": (),
    "mushroom": MUSHROOM_FEATURES,
    "votes": VOTES_FEATURES,
    "adult_train": ADULT_CATEGORICAL,
    "adult_test": ADULT_CATEGORICAL,
    "adult": ADULT_CATEGORICAL,
    "spambase": (),
}
TEXT_FEATURES: dict[str, tuple[str, ...]] = {name: () for name in DATASETS} | {
    "sms_spam": ("text",)
}

MISSING = "?"  # the token the UCI files use for a missing / "neither" value

# ----------------------------------------------------------------------------------------------
# Availability
# ----------------------------------------------------------------------------------------------


def shared_data_available(*names: str) -> bool:
    """True when DATA_DIR holds the files of the named datasets (of all, when none named)."""
    wanted = names or DATASETS
    return DATA_DIR.is_dir() and all(
        (DATA_DIR / f).is_file() for name in wanted for f in FILES[name]
    )


def require_shared_data(*names: str) -> Path:
    """Skip the calling test when the shared data is absent; fail instead when ``CI`` is set.

    ``names`` restricts the check to those datasets (default: all). Returns DATA_DIR.
    """
    for name in names:
        if name not in FILES:
            raise ValueError(f"unknown dataset {name!r}; expected one of {DATASETS}")
    if not shared_data_available(*names):
        wanted = names or DATASETS
        missing = [
            str(DATA_DIR / f) for n in wanted for f in FILES[n] if not (DATA_DIR / f).is_file()
        ]
        reason = (
            f"../shared/data not found: {DATA_DIR} (missing {', '.join(missing)}); "
            "the real UCI datasets live outside the repository, see ../shared/data/README.md"
        )
        if in_ci():
            pytest.fail(f"CI is set but the shared data is missing -- {reason}", pytrace=False)
        pytest.skip(reason)
    return DATA_DIR


# ----------------------------------------------------------------------------------------------
# sqlglot building blocks
# ----------------------------------------------------------------------------------------------


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(_ident(name), table=_ident(table) if table else None)


def _raw(i: int) -> str:
    """Positional name given to the i-th field of a file inside read_csv."""
    return f"c{i}"


def _kwarg(name: str, value: exp.Expression) -> exp.EQ:
    """A DuckDB named table-function parameter ``name = value``."""
    return exp.EQ(this=exp.column(name), expression=value)


def _read_csv(
    path: Path,
    types: Sequence[str],
    *,
    delim: str = ",",
    skip: int = 0,
    nullstr: str | None = None,
) -> exp.Expression:
    """``read_csv(path, ...)`` with explicit positional columns c0..cN, no header, no quoting."""
    columns = exp.Struct(
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier(_raw(i)), expression=exp.Literal.string(t))
            for i, t in enumerate(types)
        ]
    )
    args = [
        exp.Literal.string(str(path)),
        _kwarg("delim", exp.Literal.string(delim)),
        _kwarg("header", exp.false()),
        _kwarg("quote", exp.Literal.string("")),
        _kwarg("escape", exp.Literal.string("")),
        _kwarg("skip", exp.Literal.number(skip)),
        _kwarg("columns", columns),
    ]
    if nullstr is not None:
        args.append(_kwarg("nullstr", exp.Literal.string(nullstr)))
    return exp.func("read_csv", *args, dialect="duckdb")


def _scan(fn: exp.Expression, alias: str) -> exp.Table:
    return exp.Table(this=fn, alias=exp.TableAlias(this=_ident(alias)))


def _row_number() -> exp.Expression:
    """0-based file row number: ROW_NUMBER() OVER () - 1 directly over a single scan."""
    return exp.Sub(this=exp.Window(this=exp.RowNumber()), expression=exp.Literal.number(1))


def _cast(e: exp.Expression, to: str) -> exp.Cast:
    return exp.cast(e, exp.DataType.build(to, dialect="duckdb"))


def _categorical(raw: exp.Expression) -> exp.Expression:
    """NULLIF(TRIM(raw), '?'): trimmed VARCHAR with the missing token as NULL."""
    return exp.Nullif(
        this=exp.Trim(this=raw), expression=exp.Literal.string(MISSING)
    )


def _numeric(raw: exp.Expression) -> exp.Expression:
    return _cast(exp.Trim(this=raw), "DOUBLE")


def _no_nulls(columns: Sequence[str]) -> exp.Expression:
    """"c1" IS NOT NULL AND "c2" IS NOT NULL AND ..."""
    return exp.and_(*(exp.Not(this=exp.Is(this=_col(c), expression=exp.null())) for c in columns))


def _finish(
    select: exp.Select, columns: Sequence[str], *, row_id: bool, drop_missing: bool
) -> exp.Select:
    """Wrap ``select`` (which exposes ``columns`` and "row_id") with the common options."""
    outer = exp.select(*(_col(c) for c in columns))
    if row_id:
        outer = outer.select(_col("row_id"))
    outer = outer.from_(exp.Subquery(this=select, alias=exp.TableAlias(this=_ident("src"))))
    if drop_missing:
        outer = outer.where(_no_nulls(columns))
    return outer.order_by(_col("row_id"))


# ----------------------------------------------------------------------------------------------
# Dataset queries (sqlglot expression trees)
# ----------------------------------------------------------------------------------------------


def sms_spam_query(
    *, data_dir: Path | None = None, row_id: bool = False, drop_missing: bool = False
) -> exp.Select:
    """``label`` VARCHAR (ham/spam), ``text`` VARCHAR. 5,574 rows."""
    path = (data_dir or DATA_DIR) / FILES["sms_spam"][0]
    inner = exp.select(
        exp.alias_(_col(_raw(0)), "label", quoted=True),
        exp.alias_(_col(_raw(1)), "text", quoted=True),
        exp.alias_(_row_number(), "row_id", quoted=True),
    ).from_(_scan(_read_csv(path, ["VARCHAR", "VARCHAR"], delim="\t"), "raw"))
    return _finish(inner, SMS_COLUMNS, row_id=row_id, drop_missing=drop_missing)


def _categorical_file_query(
    path: Path, columns: Sequence[str], *, row_id: bool, drop_missing: bool
) -> exp.Select:
    inner = exp.select(
        *(exp.alias_(_categorical(_col(_raw(i))), c, quoted=True) for i, c in enumerate(columns)),
        exp.alias_(_row_number(), "row_id", quoted=True),
    ).from_(_scan(_read_csv(path, ["VARCHAR"] * len(columns)), "raw"))
    return _finish(inner, columns, row_id=row_id, drop_missing=drop_missing)


def mushroom_query(
    *, data_dir: Path | None = None, row_id: bool = False, drop_missing: bool = False
) -> exp.Select:
    """``class`` (e/p) + 22 categorical VARCHAR columns; ``?`` (stalk-root) is NULL."""
    path = (data_dir or DATA_DIR) / FILES["mushroom"][0]
    return _categorical_file_query(
        path, MUSHROOM_COLUMNS, row_id=row_id, drop_missing=drop_missing
    )


def votes_query(
    *, data_dir: Path | None = None, row_id: bool = False, drop_missing: bool = False
) -> exp.Select:
    """``party`` (democrat/republican) + 16 votes y/n VARCHAR; ``?`` is NULL."""
    path = (data_dir or DATA_DIR) / FILES["votes"][0]
    return _categorical_file_query(path, VOTES_COLUMNS, row_id=row_id, drop_missing=drop_missing)


def _adult_select(path: Path, *, test_file: bool) -> exp.Select:
    exprs: list[exp.Expression] = []
    for i, c in enumerate(ADULT_COLUMNS):
        raw = _col(_raw(i))
        if c in ADULT_NUMERIC:
            e = _numeric(raw)
        elif c == "income" and test_file:
            # adult.test labels end with a dot: '>50K.' -> '>50K'
            e = exp.func("rtrim", exp.Trim(this=raw), exp.Literal.string("."), dialect="duckdb")
        else:
            e = _categorical(raw)
        exprs.append(exp.alias_(e, c, quoted=True))
    exprs.append(exp.alias_(_row_number(), "row_id", quoted=True))
    skip = 1 if test_file else 0  # adult.test starts with '|1x3 Cross validator'
    return exp.select(*exprs).from_(
        _scan(_read_csv(path, ["VARCHAR"] * len(ADULT_COLUMNS), skip=skip), "raw")
    )


def adult_query(
    split: Literal["train", "test", "all"] = "train",
    *,
    data_dir: Path | None = None,
    row_id: bool = False,
    drop_missing: bool = False,
) -> exp.Select:
    """adult.data (``train``), adult.test (``test``) or both (``all``, adds ``is_test``).

    6 DOUBLE numeric columns (ADULT_NUMERIC), 8 trimmed VARCHAR categorical columns with ``?`` as
    NULL, label ``income`` ('<=50K' / '>50K'). With ``split='all'`` the row_id runs over the
    train rows first (0..32560), then the test rows (32561..48841).
    """
    d = data_dir or DATA_DIR
    train_path, test_path = (d / f for f in FILES["adult"])
    if split == "train":
        inner = _adult_select(train_path, test_file=False)
        return _finish(inner, ADULT_COLUMNS, row_id=row_id, drop_missing=drop_missing)
    if split == "test":
        inner = _adult_select(test_path, test_file=True)
        return _finish(inner, ADULT_COLUMNS, row_id=row_id, drop_missing=drop_missing)
    if split != "all":
        raise ValueError(f"split must be 'train', 'test' or 'all', not {split!r}")

    def part(path: Path, is_test: bool, offset: int) -> exp.Select:
        sub = exp.Subquery(
            this=_adult_select(path, test_file=is_test), alias=exp.TableAlias(this=_ident("f"))
        )
        return exp.select(
            *(_col(c) for c in ADULT_COLUMNS),
            exp.alias_(exp.true() if is_test else exp.false(), "is_test", quoted=True),
            exp.alias_(
                exp.Add(this=_col("row_id"), expression=exp.Literal.number(offset)),
                "row_id",
                quoted=True,
            ),
        ).from_(sub)

    union = exp.union(
        part(train_path, False, 0), part(test_path, True, ADULT_TRAIN_ROWS), distinct=False
    )
    outer = exp.select(*(_col(c) for c in ADULT_COLUMNS), _col("is_test"))
    if row_id:
        outer = outer.select(_col("row_id"))
    outer = outer.from_(exp.Subquery(this=union, alias=exp.TableAlias(this=_ident("src"))))
    if drop_missing:
        outer = outer.where(_no_nulls(ADULT_COLUMNS))
    return outer.order_by(_col("row_id"))


def adult_train_query(**kwargs) -> exp.Select:
    return adult_query("train", **kwargs)


def adult_test_query(**kwargs) -> exp.Select:
    return adult_query("test", **kwargs)


def spambase_query(
    *, data_dir: Path | None = None, row_id: bool = False, drop_missing: bool = False
) -> exp.Select:
    """57 DOUBLE features, ``spam`` INTEGER (1 = spam), ``is_test`` BOOLEAN (ESL split).

    spambase.esl_traintest holds one 0/1 per line (1 = test); it is joined to spambase.data by
    file row number (ROW_NUMBER() OVER () over each single scan).
    """
    d = data_dir or DATA_DIR
    data_path, split_path = (d / f for f in FILES["spambase"])
    data = exp.select(
        *(
            exp.alias_(_col(_raw(i)), c, quoted=True)
            for i, c in enumerate(SPAMBASE_COLUMNS)
        ),
        exp.alias_(_row_number(), "row_id", quoted=True),
    ).from_(
        _scan(_read_csv(data_path, ["DOUBLE"] * len(SPAMBASE_FEATURES) + ["INTEGER"]), "raw")
    )
    split = exp.select(
        exp.alias_(
            exp.EQ(this=_col(_raw(0)), expression=exp.Literal.number(1)), "is_test", quoted=True
        ),
        exp.alias_(_row_number(), "row_id", quoted=True),
    ).from_(_scan(_read_csv(split_path, ["INTEGER"]), "raw"))
    joined = (
        exp.select(
            *(_col(c, "d") for c in SPAMBASE_COLUMNS),
            _col("is_test", "s"),
            _col("row_id", "d"),
        )
        .from_(exp.Subquery(this=data, alias=exp.TableAlias(this=_ident("d"))))
        .join(
            exp.Subquery(this=split, alias=exp.TableAlias(this=_ident("s"))),
            on=exp.EQ(this=_col("row_id", "d"), expression=_col("row_id", "s")),
            join_type="inner",
        )
    )
    columns = (*SPAMBASE_COLUMNS, "is_test")
    return _finish(joined, columns, row_id=row_id, drop_missing=drop_missing)


_QUERIES = {
    "sms_spam": sms_spam_query,
    "mushroom": mushroom_query,
    "votes": votes_query,
    "adult_train": adult_train_query,
    "adult_test": adult_test_query,
    "adult": lambda **kw: adult_query("all", **kw),
    "spambase": spambase_query,
}


def query(
    name: str, *, data_dir: Path | None = None, row_id: bool = False, drop_missing: bool = False
) -> exp.Select:
    """The DuckDB query of dataset ``name`` as a sqlglot expression tree.

    ``row_id=True`` adds a 0-based BIGINT ``row_id`` (file line order, header/junk lines not
    counted). ``drop_missing=True`` keeps only rows without NULL (i.e. without ``?``) in any
    column. Rows are ordered by file position (ORDER BY row_id at the top level).
    """
    try:
        build = _QUERIES[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; expected one of {DATASETS}") from None
    return build(data_dir=data_dir, row_id=row_id, drop_missing=drop_missing)


def render(expr: exp.Expression) -> str:
    """DuckDB SQL text of a sqlglot expression tree."""
    return expr.sql(dialect="duckdb")


def relation(
    con: duckdb.DuckDBPyConnection,
    name: str,
    *,
    data_dir: Path | None = None,
    row_id: bool = False,
    drop_missing: bool = False,
) -> duckdb.DuckDBPyRelation:
    """``con.sql(render(query(name, ...)))``."""
    expr = query(name, data_dir=data_dir, row_id=row_id, drop_missing=drop_missing)
    return con.sql(render(expr))


# ----------------------------------------------------------------------------------------------
# numpy side (scikit-learn oracle), loaded through the same queries
# ----------------------------------------------------------------------------------------------

MissingPolicy = Literal["value", "drop", "minus_one"]


@dataclass(frozen=True)
class NumpyDataset:
    """One dataset as numpy arrays, rows in file order.

    * ``numeric``: float64 (n, len(numeric_names)) or None.
    * ``categorical``: int64 codes (n, len(categorical_names)) or None; column j has codes
      0..len(categories[j])-1 indexing ``categories[j]`` (sorted strings, like sklearn's
      OrdinalEncoder). With ``missing='value'`` the missing token ``'?'`` is an ordinary category;
      with ``'minus_one'`` missing cells are coded -1 (and ``'?'`` is not in the lists).
    * ``text``: object array of str (sms_spam) or None.
    * ``y``: labels as loaded (str, or int for spambase); ``classes``: sorted unique labels.
    * ``is_test``: bool mask for the datasets with a split (spambase, adult), else None.
    * ``row_id``: 0-based file row of each row (differs from arange when rows were dropped).
    """

    name: str
    y: np.ndarray
    classes: np.ndarray
    row_id: np.ndarray
    numeric: np.ndarray | None = None
    numeric_names: tuple[str, ...] = ()
    categorical: np.ndarray | None = None
    categorical_names: tuple[str, ...] = ()
    categories: tuple[tuple[str, ...], ...] = ()
    text: np.ndarray | None = None
    is_test: np.ndarray | None = None

    @property
    def X(self) -> np.ndarray:
        """The single feature block (raises for adult, which has numeric and categorical)."""
        blocks = [b for b in (self.numeric, self.categorical, self.text) if b is not None]
        if len(blocks) != 1:
            raise AttributeError(
                f"{self.name} has both numeric and categorical features: use .numeric and "
                ".categorical"
            )
        return blocks[0]

    @property
    def n_categories(self) -> list[int]:
        """Per categorical column, the number of categories (for CategoricalNB min_categories)."""
        return [len(c) for c in self.categories]

    def subset(self, mask: np.ndarray) -> NumpyDataset:
        """Rows selected by a boolean mask or index array (categories kept as they are)."""
        take = lambda a: None if a is None else a[mask]  # noqa: E731
        return replace(
            self,
            y=self.y[mask],
            row_id=self.row_id[mask],
            numeric=take(self.numeric),
            categorical=take(self.categorical),
            text=take(self.text),
            is_test=take(self.is_test),
        )

    def train(self) -> NumpyDataset:
        if self.is_test is None:
            raise AttributeError(f"{self.name} has no train/test split")
        return self.subset(~self.is_test)

    def test(self) -> NumpyDataset:
        if self.is_test is None:
            raise AttributeError(f"{self.name} has no train/test split")
        return self.subset(self.is_test)


def _encode(
    values: list[str | None], missing: MissingPolicy, categories: Sequence[str] | None
) -> tuple[np.ndarray, tuple[str, ...]]:
    if missing == "value":
        values = [MISSING if v is None else v for v in values]
    if categories is None:
        categories = tuple(sorted({v for v in values if v is not None}))
    index = {c: i for i, c in enumerate(categories)}
    # None (missing, 'minus_one') and values outside the given categories are coded -1
    codes = np.fromiter((index.get(v, -1) for v in values), dtype=np.int64, count=len(values))
    return codes, tuple(categories)


def numpy_dataset(
    name: str,
    *,
    missing: MissingPolicy = "value",
    categories: Sequence[Sequence[str]] | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    data_dir: Path | None = None,
) -> NumpyDataset:
    """Load dataset ``name`` through :func:`query` (DuckDB -> Arrow -> numpy).

    ``missing``: ``'value'`` keeps ``?`` as its own category ``'?'``; ``'drop'`` removes every
    row with a missing cell (the SQL side is ``query(name, drop_missing=True)``); ``'minus_one'``
    codes missing cells -1. ``categories``: per categorical column, the category list to encode
    with (e.g. the train set's); values not in it are coded -1. Default: the sorted distinct
    values of the loaded rows (for ``adult`` these are taken over train and test together).
    """
    if missing not in ("value", "drop", "minus_one"):
        raise ValueError(f"missing must be 'value', 'drop' or 'minus_one', not {missing!r}")
    con = con or duckdb.connect()
    expr = query(name, data_dir=data_dir, row_id=True, drop_missing=missing == "drop")
    table = con.sql(render(expr)).to_arrow_table()
    cols = {c: table.column(c) for c in table.column_names}

    label = LABEL_COLUMN[name]
    y = np.asarray(cols[label].to_pylist(), dtype=np.int64 if name == "spambase" else object)
    row_id = cols["row_id"].to_numpy().astype(np.int64)
    is_test = None
    if "is_test" in cols:
        is_test = cols["is_test"].to_numpy(zero_copy_only=False).astype(bool)

    num_names = NUMERIC_FEATURES[name]
    numeric = None
    if num_names:
        numeric = np.column_stack(
            [cols[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in num_names]
        )

    cat_names = CATEGORICAL_FEATURES[name]
    categorical, cats = None, ()
    if cat_names:
        if categories is not None and len(categories) != len(cat_names):
            raise ValueError(
                f"{name}: expected {len(cat_names)} category lists, got {len(categories)}"
            )
        blocks, lists = [], []
        for j, c in enumerate(cat_names):
            codes, cl = _encode(
                cols[c].to_pylist(), missing, None if categories is None else categories[j]
            )
            blocks.append(codes)
            lists.append(cl)
        categorical, cats = np.column_stack(blocks), tuple(lists)

    text = None
    if TEXT_FEATURES[name]:
        text = np.asarray(cols["text"].to_pylist(), dtype=object)

    return NumpyDataset(
        name=name,
        y=y,
        classes=np.unique(y),
        row_id=row_id,
        numeric=numeric,
        numeric_names=num_names,
        categorical=categorical,
        categorical_names=cat_names,
        categories=cats,
        text=text,
        is_test=is_test,
    )
