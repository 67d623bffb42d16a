"""Column screening at fit: columns that would hurt a model left out, each with a reason.

A table's columns are not all features. A customer ID read as a Gaussian feature gives
every class a density so wide that the classifier falls back on the majority class (on
one real data set: accuracy 0.715 with the ID, 0.875 without); a sample ID
with a few repeats sets the Gaussian variance floor and flattens every other column
(accuracy 0.8147 with it, 0.9698 without). When the user has not listed the
features, :func:`screen` leaves out, with one line each, two sorts of column, and no
other: identifiers, and columns whose removal changes no probability.

* An **identifier**, by its values: an integer, decimal or text column (not
  floating-point, not boolean) whose values are all different, one in every row; an
  integer column with distinct values in at least :data:`NEAR_UNIQUE` (90%) of its
  non-NULL rows, when it has :data:`NEAR_MIN_ROWS` (100) of them or more and is not a
  count feature (multinomial, complement, Bernoulli: counts of a frequent term in a few
  hundred documents are near-unique too); a text column the model would learn as
  categories with more distinct values than :data:`MAX_DISTINCT_SHARE` (50%) of its
  non-NULL rows.
* An **identifier by its name**: a column whose last word is ``id``, ``ids``, ``uuid``,
  ``guid`` or ``identifier`` (:func:`id_like_name`: ``id``, ``sample_id``, ``SampleID``,
  ``customerId``, ``order-uuid``; not ``paid`` or ``valid``), of any numeric or text type
  (a float column too: an integer ID with NULLs written by pandas), when its values also
  look like one: distinct in at least :data:`NAME_SHARE` (50%) of its non-NULL rows, at
  least :data:`MIN_ROWS` of them; in a source of fewer rows (2 or more), a different
  value in every row. A code such as ``region_id`` with ten values stays.
* A **constant** column (one value, or NULL, in every row) only where it adds the same
  term to every class, so that leaving it out changes no probability
  (:func:`constant_free`): a Gaussian feature (the same mean and variance, the floor, in
  every class), and a categorical or binned feature of a naive structure with unseen
  values treated as missing (its one value has probability 1 in every class); and in
  LDA, QDA and logistic regression. A constant multinomial or complement feature is part
  of the vocabulary (its α enters every class's denominator) and a constant Bernoulli
  feature adds a class-dependent absent (or present) term, so they are kept: the model is
  then scikit-learn's, which counts them; so are constants of tree (TAN) features and of
  categorical features with ``unseen="bucket"``.

Floating-point columns are never identifiers by their values (measurements are often all
different). The check reads the first :data:`SAMPLE_ROWS` rows only, so its cost does not
grow with the data; the constant rule is applied only when those rows are the whole
source, because a rare value later in the data would make the column informative; in a
source of fewer than :data:`MIN_ROWS` rows it leaves out only a column NULL in every row
(:func:`_small`). One
query takes ``COUNT(*)`` and ``COUNT``, ``MIN`` and ``MAX`` of every column that could be an
identifier; a column no rule can call one (a BOOLEAN, a float not named like an ID) could
only be a constant, so its ``COUNT``, ``MIN`` and ``MAX`` are read by a second query only
when the first rows were the whole source (a large file of measurements reads none of its
columns here, and count features stored as DOUBLE, which are never left out, nothing at all). A column is constant when its minimum equals its maximum (in DuckDB, hundreds or more numeric columns are read in the
long shape, :func:`sqlnb.sql.long_select`, beside that query). ``COUNT(DISTINCT ...)`` is
needed only for the columns that could still be an identifier: text columns, integer
columns whose range ``max − min + 1`` holds enough different values (a 0/1 column of
2,000 rows cannot be an ID), and columns named like an identifier. Those are counted
:data:`DISTINCT_CHUNK` columns per query: DuckDB's time for one SELECT of many distinct
aggregates grows much faster than their number (300 columns of 2,000 rows: 1.9 s; 600:
16.9 s), which made screening a 1,000-column table take over a minute. A column is kept
by naming it (``keep``, ``--keep-columns``) or by listing the features explicitly.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.engines.base import first_rows
from sqlnb.errors import ScreeningWarning, SqlnbError, cli_name, shell_word, warn
from sqlnb.models.naive_bayes import tan
from sqlnb.models.naive_bayes.fit import planned_kinds
from sqlnb.source import Source
from sqlnb.sql.types import is_float, is_integer, is_numeric, is_text_type

#: Rows read from the start of the source.
SAMPLE_ROWS = 100_000
#: Fewer sampled rows than this: too few to call anything an ID by its values alone (only
#: a name like an ID with a different value in every row is one: :func:`_small`).
MIN_ROWS = 20
#: A text column with more distinct values than this share of its non-NULL rows is left out.
MAX_DISTINCT_SHARE = 0.5
#: An integer column with distinct values in at least this share of its non-NULL rows is an
#: identifier (441 distinct sample IDs in 467 rows, 94%) ...
NEAR_UNIQUE = 0.9
#: ... when it has at least this many non-NULL rows (in fewer, an integer measurement of a
#: wide range, a count of cells, is near-unique by chance).
NEAR_MIN_ROWS = 100
#: A column named like an identifier (:func:`id_like_name`) with distinct values in at least
#: this share of its non-NULL rows is one.
NAME_SHARE = 0.5
#: Last words of a name that make it an identifier's (with values that look like one).
ID_WORDS = frozenset({"id", "ids", "uuid", "guid", "identifier"})
#: Families whose constant feature adds the same term to every class (see :func:`constant_free`).
CONSTANT_FREE = frozenset({"gaussian", "categorical", "binned"})
#: Count families: a constant changes their probabilities, and near-unique counts are no IDs.
COUNT_FAMILIES = frozenset({"multinomial", "complement", "bernoulli"})
#: A value that reads like a mark of a missing value: punctuation only (``?``, ``-``,
#: ``.``) or a usual word for it (``NA``, ``N/A``, ``NULL``, ``None``, ``missing``, ...).
MISSING_MARKER = re.compile(r"^\s*([^\w\s]+|n/?a|#n/?a|null|none|nil|missing|unknown)\s*$", re.I)
#: Columns per ``COUNT(DISTINCT ...)`` query (see the module docstring).
DISTINCT_CHUNK = 64


@dataclass(frozen=True)
class Screened:
    """A column left out, and why (one line for stderr and ``show``)."""

    column: str
    reason: str

    def line(self) -> str:
        name = shell_word(self.column)
        return (f"note: left out column {self.column!r}: {self.reason} (keep it with --keep-columns {name}, "
                f"keep_columns=[{self.column!r}] in Python, or list the features)")

    def to_dict(self) -> dict:
        return {"column": self.column, "reason": self.reason}


def candidates(source: Source, label: str, weight: str | None, exclude: Sequence[str] | None,
               keep: Sequence[str] | None, numeric_only: bool = False) -> list[str]:
    """The columns an automatic feature plan would take that screening looks at
    (``numeric_only`` for the dense kinds, whose plan refuses other columns by name)."""
    skip = {label, weight, *(exclude or ()), *(keep or ())}
    return [c for c, t in source.columns.items()
            if c not in skip and (is_numeric(t) or t.upper() == "BOOLEAN" or (is_text_type(t) and not numeric_only))]


def id_like_name(name: str) -> bool:
    """Whether a column's name ends in a word of :data:`ID_WORDS`: words split at
    anything but letters and digits and where a lower-case letter or digit meets an
    upper-case one (``SampleID``, ``customerId``: ``id``); ``paid``, ``valid`` and ``idx``
    are not."""
    words = re.split(r"[^0-9A-Za-z]+|(?<=[a-z0-9])(?=[A-Z])", name.strip())
    words = [w for w in words if w]
    return bool(words) and words[-1].lower() in ID_WORDS


def constant_free(family: str | None, unseen: str = "missing", structure: str = "naive") -> bool:
    """Whether a constant (or all-NULL) feature of ``family`` adds the same term to every
    class, so that leaving it out changes no probability.

    A Gaussian one has the same mean and variance (the floor ε) in every class; a
    categorical or binned one has one value of probability ``(N_c + α)/(N_c + α·1) = 1``
    in every class, but not with ``unseen="bucket"`` (two slots: ``(N_c + α)/(N_c + 2α)``)
    nor as a tree feature (``structure="tan"``, where it takes part in the tree). A
    multinomial or complement one is part of the vocabulary (``α`` in the denominator of
    every class), a Bernoulli one adds ``ln((N_c + α)/(N_c + 2α))``, different per class.
    ``None`` (a dense model, or a type without a kind, which the plan refuses): True."""
    if family is None:
        return True
    if family not in CONSTANT_FREE:
        return False
    if family == "gaussian":
        return True
    return not tan.needs_pairs(structure) and (family == "binned" or unseen != "bucket")


def screen_plan(engine: Any, source: Source, label: str, weight: str | None, features: Sequence[str] | None,
                exclude: Sequence[str] | None, keep: Sequence[str] | None, enabled: bool = True,
                numeric_only: bool = False, asked: Sequence[str] = (),
                naive_bayes: Iterable[Mapping[str, Any]] | None = None) -> list[Screened]:
    """Screening of an automatic feature plan: none when ``features`` are listed or
    ``enabled`` is false; otherwise :func:`screen` over the :func:`candidates`, each
    column left out said as a :class:`~sqlnb.errors.ScreeningWarning`. Columns in
    ``keep`` must exist (a typo is an error, not a silent no-op); ``asked`` are columns the
    caller asked for otherwise (given a kind), checked where they are used.

    ``naive_bayes`` are the options (``kind``, ``feature_kinds``, ``bins``, ``unseen``,
    ``structure``) of each naive Bayes model the plan is for (one for a fit, one per grid
    point for cross-validation): a constant column is left out only when it is
    :func:`constant_free` in every one, and a column that is a count feature in any is
    no identifier by near-unique values. None: LDA, QDA, logistic regression."""
    if keep:
        source.require(list(keep), "column to keep")
    if features is not None or not enabled:
        return []
    columns = candidates(source, label, weight, exclude, [*(keep or ()), *asked], numeric_only)
    free, counts = None, set()
    if naive_bayes is not None:
        free = set(columns)
        for o in naive_bayes:
            kinds = planned_kinds(source, columns, o.get("kind", "auto"), o.get("feature_kinds"), o.get("bins"))
            free &= {c for c, k in kinds.items()
                     if constant_free(k, o.get("unseen", "missing"), o.get("structure", "naive"))}
            counts |= {c for c, k in kinds.items() if k in COUNT_FAMILIES}
    found = screen(engine, source, columns, constant_free=free, counts=counts)
    _refuse_nothing_left(source, label, weight, exclude, found)
    for s in found:
        warn(s.line(), ScreeningWarning)
    return found


def _refuse_nothing_left(source: Source, label: str, weight: str | None, exclude: Sequence[str] | None,
                         found: Sequence[Screened]) -> None:
    """When screening leaves no feature at all and left out a text column, one error line
    naming each such column and the options that keep it: a column of free text (a
    table of (topic, body) articles, every body different) is a bag of words
    (``--feature-kind body=multinomial``, scikit-learn's CountVectorizer with
    MultinomialNB), which screening never guesses; ``--keep-columns`` keeps it as
    categories. (Without this the fit would fail with "no feature column", silent on why.)"""
    gone = {s.column for s in found}
    left = [c for c in source.columns if c not in {label, weight, *(exclude or ()), *gone}]
    text = [s for s in found if is_text_type(source.columns[s.column])]
    if left or not text:
        return
    named = "; ".join(f"{s.column!r}: {s.reason}" for s in text)
    first = shell_word(text[0].column)
    bag = shlex.quote(",".join(f"{cli_name(s.column)}=multinomial" for s in text))
    raise SqlnbError(
        f"{source.description} has no feature column besides the label once screening left out its text "
        f"column{'s' if len(text) > 1 else ''} ({named}); fit free text as a bag of words with --feature-kind {bag} "
        f"(feature_kinds={{{text[0].column!r}: 'multinomial'}} in Python), or keep it as categories with "
        f"--keep-columns {first}")


def screen(engine: Any, source: Source, columns: Sequence[str], sample_rows: int = SAMPLE_ROWS,
           constant_free: Iterable[str] | None = None, counts: Iterable[str] = ()) -> list[Screened]:
    """The columns among ``columns`` to leave out of an automatic feature plan (the rules
    of the module docstring).

    Parameters
    ----------
    engine : Engine
        Runs the queries (:mod:`sqlnb.engines`).
    source : Source
        The training rows.
    columns : list of str
        Candidate feature columns (see :func:`candidates`).
    sample_rows : int
        Rows read from the start of the source.
    constant_free : collection of str, optional
        The columns left out when constant (whose constant term is the same in every
        class); None: every column.
    counts : collection of str
        Count features, which are no identifiers by near-unique values.
    """
    if not columns:
        return []
    free = set(columns if constant_free is None else constant_free)
    # A column that no rule can call an identifier is left out only as a constant, and only
    # when the first rows are the whole source: its values are read once that is known, so
    # that a large source of such columns reads none of them here.
    only_constant = {c for c in columns if _only_constant(c, source.columns[c])}
    if all(c in only_constant and c not in free for c in columns):
        return []  # e.g. count features stored as DOUBLE: nothing here could be left out, nothing read
    with first_rows(engine):  # DuckDB: without late materialization (DuckDBEngine.first_rows)
        n, present, lo_hi = _min_max(engine, source, [c for c in columns if c not in only_constant], sample_rows)
        _note_markers(engine, source, present, lo_hi, n, sample_rows)
        whole = n < sample_rows
        later = [c for c in columns if c in only_constant and c in free] if whole else []
        if n < MIN_ROWS:
            return _small(engine, source, columns, free, later, n, present, lo_hi, sample_rows)
        if later:
            _, more, more_lo_hi = _min_max(engine, source, later, sample_rows)
            present.update(more)
            lo_hi.update(more_lo_hi)
        counts = set(counts)
        share = {c: _id_share(c, source.columns[c], present[c], n, c in counts) if c in present else None
                 for c in columns}
        distinct = {c: (0 if present[c] == 0 else 1 if lo == hi else None) for c, (lo, hi) in lo_hi.items()}
        distinct.update({c: None for c in columns if c not in present})  # not read: nothing to leave out
        wanted = [c for c in columns if distinct[c] is None and share[c] is not None
                  and _has_room(source.columns[c], present[c], share[c], *lo_hi[c])]
        distinct.update(_distinct(engine, source, wanted, sample_rows))
    out = []
    for c in columns:
        t, d, m = source.columns[c], distinct[c], present.get(c)
        if d is None:  # not counted: neither constant nor possibly unique
            continue
        rows = f"{m:,} non-NULL rows" + ("" if whole else f" of the first {n:,}")
        if d <= 1:
            if whole and c in free:
                out.append(_constant(c, d))
        elif not is_float(t) and t.upper() != "BOOLEAN" and m == n and d == n:
            out.append(Screened(c, f"a different value in each of the {'' if whole else 'first '}{n:,} rows, "
                                   "like an ID"))
        elif is_integer(t) and c not in counts and m >= NEAR_MIN_ROWS and d >= NEAR_UNIQUE * m:
            out.append(Screened(c, f"{d:,} distinct integers in {rows} (at least {NEAR_UNIQUE:.0%}), like an ID"))
        elif id_like_name(c) and m >= MIN_ROWS and d >= NAME_SHARE * m:
            out.append(Screened(c, f"named like an ID, with {d:,} distinct values in {rows} "
                                   f"(at least {NAME_SHARE:.0%})"))
        elif is_text_type(t) and m and d > MAX_DISTINCT_SHARE * m:
            out.append(Screened(c, f"{d:,} distinct values in {m:,} non-NULL rows "
                                   f"(more than {MAX_DISTINCT_SHARE:.0%}), too many to learn as categories"))
    return out


def _distinct(engine: Any, source: Source, columns: Sequence[str], sample_rows: int) -> dict[str, int]:
    """``COUNT(DISTINCT ...)`` of each of ``columns`` over the first ``sample_rows`` rows,
    :data:`DISTINCT_CHUNK` columns a query."""
    out = {}
    for a in range(0, len(columns), DISTINCT_CHUNK):
        chunk = columns[a:a + DISTINCT_CHUNK]
        aggs = [exp.alias_(exp.Count(this=exp.Distinct(expressions=[sql.col(c, "s")])), f"d{j}", quoted=True)
                for j, c in enumerate(chunk)]
        got = engine.execute(exp.select(*aggs).from_(_sample(source, chunk, sample_rows), copy=False))[0]
        out.update({c: int(d) for c, d in zip(chunk, got)})
    return out


def _constant(column: str, distinct: int) -> Screened:
    """A constant column left out: ``distinct`` (0 or 1) values in every row."""
    what = "NULL in every row" if distinct == 0 else "the same value in every row"
    return Screened(column, f"constant ({what}), which changes no probability")


def _small(engine: Any, source: Source, columns: Sequence[str], free: set, later: Sequence[str], n: int,
           present: dict, lo_hi: Mapping[str, tuple], sample_rows: int) -> list[Screened]:
    """Screening of a source of fewer than :data:`MIN_ROWS` rows (all of them read): too
    few for any rule by values alone, but a column named like an identifier
    (:func:`id_like_name`) with a value in each of its ``n`` rows (2 or more), all
    different, is one (``customer_id`` of a 12-row file): a Gaussian feature of it would
    learn each class's IDs. A column of ``free`` that is NULL in every one of the ``n``
    rows (1 or more) is left out too, as in a larger source: it adds no term to any class
    (a categorical column of no values, a Gaussian one of no moments). ``later`` are the
    columns ``present`` lacks (BOOLEAN and floating-point ones): counted here, a few rows."""
    if n and later:
        present.update(_min_max(engine, source, later, sample_rows)[1])
    named = [c for c, m in present.items() if m == n and id_like_name(c) and lo_hi[c][0] != lo_hi[c][1]]
    distinct = _distinct(engine, source, named, sample_rows)
    ids = {c: Screened(c, f"named like an ID, with a different value in each of the {n:,} rows")
           for c in named if distinct[c] == n}
    empty = {c: _constant(c, 0) for c in columns if n and c in free and present.get(c) == 0}
    return [ids.get(c) or empty[c] for c in columns if c in ids or c in empty]


def _only_constant(name: str, t: str) -> bool:
    """Whether no rule can call column ``name`` of type ``t`` an identifier, whatever its
    values (:func:`_id_share` None for every count of rows): a BOOLEAN, or a floating-point
    column not named like an identifier. Screening can then leave it out only as a constant."""
    return t.upper() in ("BOOLEAN", "BOOL") or (is_float(t) and not id_like_name(name))


def _min_max(engine: Any, source: Source, columns: Sequence[str], sample_rows: int) -> tuple[int, dict, dict]:
    """``(rows, {column: non-NULL count}, {column: (MIN, MAX)})`` over the first
    ``sample_rows`` rows: one query for ``COUNT(*)`` and the narrow columns, and, in
    DuckDB from :data:`LONG_MIN` columns, one in the long shape (:func:`_screen_long`)."""
    long = _long_columns(engine, source, columns)
    narrow = [c for c in columns if c not in set(long)]
    aggregates: list[exp.Expression] = [exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True)]
    for j, c in enumerate(narrow):
        x = sql.col(c, "s")
        # PostgreSQL has no MIN/MAX of a BOOLEAN: compared as 0/1 there and everywhere.
        v = exp.Cast(this=x.copy(), to=exp.DataType.build("int")) if source.columns[c].upper() == "BOOLEAN" else x
        aggregates += [exp.alias_(exp.Count(this=x), f"c{j}", quoted=True),
                       exp.alias_(exp.Min(this=v.copy()), f"lo{j}", quoted=True),
                       exp.alias_(exp.Max(this=v.copy()), f"hi{j}", quoted=True)]
    row = engine.execute(exp.select(*aggregates).from_(_sample(source, narrow, sample_rows), copy=False))[0]
    present = {c: int(row[1 + 3 * j]) for j, c in enumerate(narrow)}
    lo_hi = {c: (row[2 + 3 * j], row[3 + 3 * j]) for j, c in enumerate(narrow)}
    if long:
        _screen_long(engine, source, long, sample_rows, present, lo_hi)
    return int(row[0]), present, lo_hi


#: Column types whose every value a DOUBLE holds exactly (MIN = MAX compared exactly).
EXACT_IN_DOUBLE = {"BOOLEAN", "BOOL", "TINYINT", "INT1", "SMALLINT", "INT2", "INTEGER", "INT", "INT4", "UTINYINT",
                   "USMALLINT", "UINTEGER", "FLOAT", "FLOAT4", "REAL", "DOUBLE", "FLOAT8"}
#: From this many such columns DuckDB screens them in the long shape (sql.long_select).
LONG_MIN = 256


def _long_columns(engine: Any, source: Source, columns: Sequence[str]) -> list[str]:
    """The columns screened in the long shape: on DuckDB, those whose values a DOUBLE
    holds exactly, when there are :data:`LONG_MIN` of them (3 aggregates per column in one
    SELECT: 10,000 columns took 8 s, most of it DuckDB planning)."""
    exact = [c for c in columns if source.columns[c].upper() in EXACT_IN_DOUBLE]
    return exact if engine.dialect == "duckdb" and len(exact) >= LONG_MIN else []


def _screen_long(engine: Any, source: Source, columns: Sequence[str], sample_rows: int,
                 present: dict, lo_hi: dict) -> None:
    """``COUNT``, ``MIN`` and ``MAX`` of ``columns`` over the first rows, each value as a
    DOUBLE (exact for these types; integers come back as ints), into ``present`` and
    ``lo_hi``."""
    values = exp.Array(expressions=[sql.as_double(sql.col(c, "src"), source.columns[c]) for c in columns])
    q = sql.long_select(source.from_("src"), [], values, lambda v: [
        exp.Count(this=v.copy()), exp.Min(this=v.copy()), exp.Max(this=v.copy())], sample_rows)
    got = {r[0]: r[1:] for r in engine.execute(q)}
    for j, c in enumerate(columns):
        count, lo, hi = got.get(j, (0, None, None))
        if not is_float(source.columns[c]):  # integers and booleans: as the one-pass query gives them
            lo, hi = (None if lo is None else int(lo)), (None if hi is None else int(hi))
        present[c], lo_hi[c] = int(count), (lo, hi)


def _note_markers(engine: Any, source: Source, present: Mapping[str, int], lo_hi: Mapping[str, tuple], n: int,
                  sample_rows: int) -> None:
    """Say (a :class:`~sqlnb.errors.ScreeningWarning`) which value made a column of CSV
    numbers text: one mark of a missing value (:data:`MISSING_MARKER`: ``?``, the UCI
    files' one, ``NA``, ``-``, ...) among numbers in the first rows. A word that is a value
    (``more`` beside ``2`` and ``4``: the UCI car data's persons) is no such mark.

    Text sorts a number's digits, signs and point apart from such a mark, so the mark is
    the column's MIN or MAX (read already, ``lo_hi``) and the other end a number: only
    such a column (of the text columns DuckDB's sniffer typed, :attr:`Source.guessed`) is
    counted, by one more query over the same first rows, holding for each the rows of the
    mark and of numbers (``TRY_CAST(x AS DOUBLE)``); a column of the mark and numbers
    only is named. A file without such a column costs nothing more."""
    if engine.dialect != "duckdb":
        return
    marks = {}
    for c, (lo, hi) in lo_hi.items():
        if c in source.guessed and is_text_type(source.columns[c]) and isinstance(lo, str) and lo != hi:
            for mark, other in ((lo, hi), (hi, lo)):
                if MISSING_MARKER.match(mark) and _number(other):
                    marks[c] = mark
    if not marks:
        return
    aggregates = []
    for j, (c, mark) in enumerate(marks.items()):
        x = sql.col(c, "s")
        aggregates += [exp.alias_(exp.Sum(this=exp.Case(ifs=[exp.If(this=x.eq(exp.Literal.string(mark)),
                                                                    true=exp.Literal.number(1))],
                                                          default=exp.Literal.number(0))), f"m{j}", quoted=True),
                       exp.alias_(exp.Count(this=exp.TryCast(this=x.copy(), to=exp.DataType.build("DOUBLE"))),
                                  f"x{j}", quoted=True)]
    row = engine.execute(exp.select(*aggregates).from_(_sample(source, list(marks), sample_rows), copy=False))[0]
    for j, (c, mark) in enumerate(marks.items()):
        rows, numbers = int(row[2 * j] or 0), int(row[2 * j + 1] or 0)
        if not rows or not numbers or rows + numbers != present[c]:
            continue  # other words too: categories
        of = f"{n:,}" if n < sample_rows else f"the first {n:,}"
        warn(f"note: column {c!r} is read as text because of the value {mark!r} in {rows:,} "
                      f"row{'s' * (rows > 1)} (of {of}); if it marks missing values, pass --null-string "
                      f"{shlex.quote(mark)} (Files(path, options={{'nullstr': ['', {mark!r}]}}) in Python)",
                      ScreeningWarning)


def _number(text: str) -> bool:
    """Whether ``text`` reads as a number (as DuckDB's cast to DOUBLE would)."""
    try:
        float(text)
        return True
    except (TypeError, ValueError):
        return False


def _sample(source: Source, columns: Sequence[str], sample_rows: int) -> exp.Subquery:
    """The first ``sample_rows`` rows of ``columns``, aliased ``s``."""
    read = [sql.col(c, "src") for c in columns] or [exp.alias_(exp.Literal.number(1), "one", quoted=True)]
    head = exp.select(*read).from_(source.from_("src"), copy=False)
    return exp.Subquery(this=head.limit(sample_rows, copy=False), alias=exp.TableAlias(this=sql.ident("s")))


def _id_share(name: str, t: str, present: int, n: int, count: bool) -> float | None:
    """The smallest share of distinct values among a column's ``present`` non-NULL values
    (of ``n`` rows) at which a rule could call it an identifier, or None (no rule could):
    a text column, the smaller of :data:`MAX_DISTINCT_SHARE` and :data:`NAME_SHARE`; a
    numeric name like an ID, :data:`NAME_SHARE`; an integer non-count column of
    :data:`NEAR_MIN_ROWS` values, :data:`NEAR_UNIQUE`; another non-float column with a
    value in every row, all different."""
    if t.upper() in ("BOOLEAN", "BOOL"):
        return None
    if is_text_type(t):
        return min(MAX_DISTINCT_SHARE, NAME_SHARE)
    if id_like_name(name) and is_numeric(t) and present >= MIN_ROWS:
        return NAME_SHARE
    if is_integer(t) and not count and present >= NEAR_MIN_ROWS:
        return NEAR_UNIQUE
    if is_float(t) or present != n:
        return None
    return 1.0


def _has_room(t: str, present: int, share: float, lo: Any, hi: Any) -> bool:
    """Whether an integer column's range ``hi − lo + 1`` holds ``share`` of ``present``
    different values (other columns: counted)."""
    if isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool):
        return hi - lo + 1 >= share * present
    return True  # text, floats named like an ID, decimals, ...: count them
