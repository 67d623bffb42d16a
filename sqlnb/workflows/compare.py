"""Learning curves: test error against training-set size for every model kind.

Ng & Jordan (2002) showed that a generative classifier (naive Bayes) approaches its
asymptotic error with far fewer examples than its discriminative partner (logistic
regression), whose asymptotic error is lower: naive Bayes ahead at small training sets,
logistic regression ahead at large ones. :func:`learning_curves` measures that for naive
Bayes, LDA, QDA and logistic regression on the same data.

For each training size ``m`` (log-spaced by default) and each repeat ``r``, the training
set is, per class ``c``, the first ``m_c`` rows of that class ordered by
``hash(<columns>, seed + r)``, with ``m_c`` proportional to the class's share of the
training source and at least 1 (a stratified sample, :func:`class_quotas`; the standard
way to draw learning-curve subsets, so that a sample of 10 rows never lacks a class) —
random, reproducible, and nested up to rounding of the quotas (for a given repeat a
class's rows at size ``m`` are among its rows at every larger size). ``stratify=False``
takes the first ``m`` rows whatever their labels. Every model kind is fitted on the same rows and scores the
whole test source in SQL (:func:`sqlnb.workflows.cv.evaluate_fold`). A fit that is not defined
(a singular covariance, a class missing from the subset) is recorded with ``error`` None
and its ``reason``. LDA and QDA fitted on the same subset share one moments scan.

Categorical columns: :func:`one_hot` adds DOUBLE indicator columns (in SQL, with the
training set's categories), so logistic regression can be compared with categorical naive
Bayes on the same information; ``options[kind]["features"]`` gives each kind its columns.
Numeric columns: :func:`presence` replaces them by indicators ``x > threshold``, the
features on which Bernoulli naive Bayes and logistic regression are a pair.

On an engine (``con`` a :class:`~sqlnb.engines.PostgresEngine` or
:class:`~sqlnb.engines.SparkEngine`) every query runs there and only counts, statistics
and figures come back: the row order is the portable hash of an integer ``key`` column
(:func:`sqlnb.workflows.cv.portable_hash`, the same on every engine, so the subsets and the
curves equal DuckDB's), and logistic regression, which is fitted in Python on the
training rows, is refused there: naive Bayes, LDA and QDA are compared.

Plots are written as plain SVG text (no plotting dependency).
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb.models import dense
from sqlnb import sql
from sqlnb.api import MODELS, fit
from sqlnb.engines import Engine, as_engine
from sqlnb.workflows.cv import evaluate_fold, is_integer_type, portable_hash
from sqlnb.models.discriminant import LDA, QDA, collect_moments
from sqlnb.errors import SqlnbError, shell_word, suggest
from sqlnb.sql.types import is_numeric
from sqlnb.models.naive_bayes.fit import plan_features
from sqlnb.source import Source, read_with

#: Options used unless given: logistic regression on standardised columns (as
#: ``StandardScaler`` + ``LogisticRegression``).
DEFAULT_OPTIONS: dict[str, dict] = {"logistic": {"standardize": True}}
LABELS = {"naive_bayes": "naive Bayes", "weighted": "weighted naive Bayes", "lda": "LDA", "qda": "QDA",
          "logistic": "logistic regression"}
COLOURS = {"naive_bayes": "#d62728", "weighted": "#ff7f0e", "lda": "#2ca02c", "qda": "#9467bd",
           "logistic": "#1f77b4"}


#: Model kinds an engine compares: logistic regression is fitted in Python, on the rows.
ENGINE_MODELS = ("naive_bayes", "lda", "qda")
#: Model kinds compared by default: the seeds' generative and discriminative pairs (naive
#: Bayes with learnt weights, which joins them, is compared when asked for: ``models=``).
DEFAULT_MODELS = ("naive_bayes", "lda", "qda", "logistic")


def check_key(source: Source, key: str | None, dialect: str) -> None:
    """Refuse a ``key`` that is not one integer column, or none on an engine."""
    if key is not None:
        source.require([key], "key column")
        if not is_integer_type(source.columns[key]):
            raise SqlnbError(f"key column {key!r} in {source.description} has type {source.columns[key]}; "
                             "the key is an integer column (a row id)")
    elif dialect != "duckdb":
        raise SqlnbError(f"learning curves on {dialect} need a key: one integer column (a row id) whose hash orders "
                         "the rows the same way on every engine (key=..., --key)")


def _order(source: Source, seed: int, key: str | None = None) -> list[exp.Expression]:
    """A random, reproducible row order: ``hash(<all columns>, seed)`` (DuckDB), or with an
    integer ``key`` its portable hash and then the key (the same order on every engine)."""
    if key is not None:
        return [portable_hash(sql.col(key, "src"), seed), sql.col(key, "src")]
    return [exp.Anonymous(this="hash", expressions=[sql.col(c, "src") for c in source.columns]
                          + [exp.Literal.number(seed)])]


def subsample(source: Source, size: int, seed: int, quotas: Mapping[Any, int] | None = None,
              label: str | None = None, key: str | None = None) -> Source:
    """The first ``size`` rows of ``source`` in ``hash(<all columns>, seed)`` order (or the
    order of ``key``, :func:`_order`) or, with
    ``quotas`` (label value -> rows, see :func:`class_quotas`), the first ``quotas[c]``
    rows of each class ``c`` of ``label`` in that order (a stratified sample; rows with
    a NULL label are left out, as a fit would skip them)."""
    if quotas is None:
        query = (exp.select(exp.Column(this=exp.Star(), table=sql.ident("src"))).from_(source.from_("src"))
                 .order_by(*_order(source, seed, key)).limit(exp.Literal.number(size)))
        what = f"sample of {size}, seed {seed}"
    else:
        y = sql.col(label, "src")
        rank = exp.Window(this=exp.RowNumber(), partition_by=[y.copy()],
                          order=exp.Order(expressions=[exp.Ordered(this=o) for o in _order(source, seed, key)]))
        ranked = (exp.select(*[sql.col(c, "src") for c in source.columns],
                             exp.alias_(rank, "rank", quoted=True))
                  .from_(source.from_("src")).where(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null()))))
        quota = exp.Case(this=sql.col(label, "r"), ifs=[exp.If(this=sql.value(c, source.columns[label]),
                                                               true=exp.Literal.number(n)) for c, n in quotas.items()],
                         default=exp.Literal.number(0))
        query = (exp.select(*[sql.col(c, "r") for c in source.columns])
                 .from_(exp.Subquery(this=ranked, alias=exp.TableAlias(this=sql.ident("r"))))
                 .where(exp.LTE(this=sql.col("rank", "r"), expression=quota)))
        what = f"stratified sample of {size}, seed {seed}"
    return Source(expr=exp.Subquery(this=query), columns=dict(source.columns),
                  description=f"{source.description} ({what})")


def class_counts(con: "duckdb.DuckDBPyConnection | Engine", source: Source, label: str) -> dict:
    """Rows per class (non-NULL label) of ``source``, in sorted class order."""
    from sqlnb.stats import sorted_values
    y = sql.col(label, "src")
    q = (exp.select(y, exp.Count(this=exp.Star())).from_(source.from_("src"))
         .where(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null()))).group_by(y.copy()))
    found = dict(as_engine(con).execute(q))
    return {c: int(found[c]) for c in sorted_values(found)}


def class_quotas(counts: Mapping[Any, int], size: int) -> dict:
    """Rows per class in a stratified sample of ``size``: proportional to ``counts`` by the
    largest-remainder rule (ties to the first class), then at least one row of every
    class when ``size`` allows it (taken from the largest quota), so that every
    sample holds every class and a classifier is defined on it."""
    total = sum(counts.values())
    if not 1 <= size <= total:
        raise SqlnbError(f"a sample of {size} rows needs 1 to {total} labelled rows")
    classes = list(counts)
    exact = [size * counts[c] / total for c in classes]
    quota = [math.floor(e) for e in exact]
    for i in sorted(range(len(classes)), key=lambda i: (-(exact[i] - quota[i]), i))[:size - sum(quota)]:
        quota[i] += 1
    for i in range(len(classes)):
        if quota[i] == 0 and size >= len(classes):
            donor = max(range(len(classes)), key=lambda j: (quota[j], -j))
            quota[donor] -= 1
            quota[i] += 1
    return {c: min(q, counts[c]) for c, q in zip(classes, quota)}


def one_hot(con: "duckdb.DuckDBPyConnection | Engine", data: Any, columns: Sequence[str],
            categories: Mapping[str, Sequence] | None = None) -> tuple[Source, dict[str, list]]:
    """``data`` plus one DOUBLE indicator column ``"<column>=<value>"`` per category.

    Categories are the column's distinct non-NULL values in ``data`` (sorted), unless
    given — pass the training set's to encode a test set the same way. A NULL or unseen
    value is all zeros. This is the encoding under which logistic regression has the
    same decision boundaries as categorical naive Bayes (both linear in the indicators).

    Returns
    -------
    (Source, dict of column -> list of categories)
    """
    from sqlnb.stats import sorted_values
    engine = as_engine(con)
    source = engine.resolve(data)
    source.require(columns, "column to encode")
    cats: dict[str, list] = {}
    for c in columns:
        if categories is not None and c in categories:
            cats[c] = list(categories[c])
            continue
        q = (exp.select(sql.col(c, "src")).distinct().from_(source.from_("src"))
             .where(exp.Not(this=exp.Is(this=sql.col(c, "src"), expression=exp.Null()))))
        cats[c] = sorted_values(r[0] for r in engine.execute(q))
    cols: list[exp.Expression] = [exp.Column(this=exp.Star(), table=sql.ident("src"))]
    for c, values in cats.items():
        for v in values:
            hit = exp.EQ(this=sql.col(c, "src"), expression=sql.value(v, source.columns[c]))
            cols.append(exp.alias_(exp.Case(ifs=[exp.If(this=hit, true=sql.dbl(1.0))], default=sql.dbl(0.0)),
                                   f"{c}={v}", quoted=True))
    query = exp.select(*cols).from_(source.from_("src"))
    names = {**source.columns, **{f"{c}={v}": "DOUBLE" for c, values in cats.items() for v in values}}
    # Compared case-insensitively: DuckDB and Spark do (PostgreSQL not, for quoted names).
    if len({n.lower() for n in names}) != len(source.columns) + sum(len(v) for v in cats.values()):
        raise SqlnbError(f"one-hot column names collide with columns of {source.description}; rename them")
    return Source(expr=exp.Subquery(this=query), columns=names,
                  description=f"{source.description} (one-hot {', '.join(columns)})"), cats


def presence(data: Source, columns: Sequence[str], threshold: float = 0.0) -> Source:
    """``data`` with each of ``columns`` replaced by the DOUBLE indicator ``x > threshold``
    (1.0 or 0.0; NULL stays NULL): the binary features on which Bernoulli naive Bayes and
    logistic regression are a generative–discriminative pair (both linear in them)."""
    data.require(columns, "column to binarize")
    wanted = set(columns)
    cols = []
    for c in data.columns:
        x = sql.col(c, "src")
        if c in wanted:
            x = exp.alias_(exp.Case(ifs=[exp.If(this=exp.Is(this=x.copy(), expression=exp.Null()), true=exp.null()),
                                         exp.If(this=exp.GT(this=x.copy(), expression=sql.dbl(threshold)),
                                                true=sql.dbl(1.0))], default=sql.dbl(0.0)), c, quoted=True)
        cols.append(x)
    query = exp.select(*cols).from_(data.from_("src"))
    types = {c: ("DOUBLE" if c in wanted else t) for c, t in data.columns.items()}
    return Source(expr=exp.Subquery(this=query), columns=types,
                  description=f"{data.description} (x > {threshold:g} for {len(columns)} columns)")


def encode(con: "duckdb.DuckDBPyConnection | Engine", train: Any, test: Any, label: str,
           features: Sequence[str] | None = None, exclude: Sequence[str] | None = None,
           binarize: float | None = None) -> tuple[Source, Source, dict[str, dict]]:
    """Prepare a training and a test set so that every model kind sees the same information.

    Naive Bayes takes categorical columns as they are; LDA, QDA and logistic regression
    get their :func:`one_hot` indicators instead (categories from ``train``, so the test
    set is encoded the same way). With ``binarize``, numeric features become the
    indicators ``x > binarize`` (:func:`presence`) for every kind, and naive Bayes models
    them as Bernoulli. Both give the generative–discriminative pairs of Ng & Jordan: naive
    Bayes and logistic regression linear in the same indicators.

    Returns
    -------
    (train, test, options)
        The sources, and per model kind the ``features`` (and for naive Bayes the
        ``feature_kinds``) to pass to :func:`learning_curves` as ``options``.
    """
    engine = as_engine(con)
    train_src, test_src = (engine.resolve(read_with(d, keep_text=(label,))) for d in (train, test))
    feats = plan_features(train_src, label, None, "auto", None, features, exclude)
    names = [f.name for f in feats]
    categorical = [n for n in names if not (is_numeric(train_src.columns[n]) or train_src.columns[n].upper() == "BOOLEAN")]
    for n in categorical:
        t = train_src.columns[n]
        if t.endswith("]") or t.upper().startswith(("MAP", "STRUCT", "UNION")):
            raise SqlnbError(f"column {n!r} in {train_src.description} has type {t}; learning curves take numeric, "
                             f"boolean and categorical columns: leave it out (--exclude {shell_word(n)})")
    numeric = [n for n in names if n not in categorical]
    nb: dict[str, Any] = {"features": names}
    binary = [n for n in numeric if train_src.columns[n].upper() != "BOOLEAN"]  # booleans already are
    if binarize is not None and binary:
        train_src, test_src = presence(train_src, binary, binarize), presence(test_src, binary, binarize)
        nb["feature_kinds"] = {n: "bernoulli" for n in binary}
    dense_features = list(numeric)
    if categorical:
        train_src, cats = one_hot(con, train_src, categorical)
        test_src, _ = one_hot(con, test_src, categorical, cats)
        dense_features += indicator_names(cats)
    options = {"naive_bayes": nb, **{m: {"features": dense_features} for m in ("lda", "qda", "logistic")}}
    return train_src, test_src, options


def indicator_names(categories: Mapping[str, Sequence]) -> list[str]:
    """The columns :func:`one_hot` adds, in order."""
    return [f"{c}={v}" for c, values in categories.items() for v in values]


def _count(con, source: Source) -> int:
    return int(as_engine(con).execute(exp.select(exp.Count(this=exp.Star())).from_(source.from_("src")))[0][0])


def default_sizes(n: int, count: int = 8, smallest: int = 10) -> list[int]:
    """``count`` log-spaced sizes from ``smallest`` to ``n`` (distinct integers)."""
    if n <= smallest:
        return [n]
    return sorted({int(round(v)) for v in np.geomspace(smallest, n, count)})


def learning_curves(
    train: Any,
    test: Any,
    label: str,
    *,
    con: "duckdb.DuckDBPyConnection | Engine | None" = None,
    models: Sequence[str] | None = None,
    sizes: Sequence[int] | None = None,
    repeats: int = 5,
    seed: int = 0,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    stratify: bool = True,
    key: str | None = None,
) -> list[dict]:
    """Test error of each model kind against training-set size.

    Parameters
    ----------
    train, test : source
        Training rows (subsampled) and test rows (always all of them): table names,
        queries, files, relations or Arrow tables, as for :func:`sqlnb.fit`.
    label : str
        The label column.
    con : duckdb connection or engine, optional
        A connection that can see both sources, or a PostgreSQL or Spark engine (module
        docstring; ``key`` is then required).
    models : list of str, optional
        Model kinds (default :data:`DEFAULT_MODELS`; on an engine :data:`ENGINE_MODELS`).
    sizes : list of int, optional
        Training sizes (default: :func:`default_sizes` of the training rows).
    repeats : int
        Random subsets per size.
    seed : int
        Seed of the first repeat's subset order (repeat ``r`` uses ``seed + r``).
    features, exclude : list of str, optional
        The feature columns, the same for every model (LDA, QDA and logistic regression
        need numeric ones).
    options : mapping of model kind -> parameters, optional
        Extra fit parameters per kind, over :data:`DEFAULT_OPTIONS` (e.g.
        ``{"qda": {"reg_param": 0.01}, "logistic": {"C": 0.5}}``). A ``features`` entry
        replaces the common ``features`` for that kind (e.g. categorical columns for naive
        Bayes and their :func:`one_hot` indicators for logistic regression).
    stratify : bool
        Draw each training subset per class, in the classes' proportions in ``train``
        and with at least one row of every class (:func:`class_quotas`): a subset of a
        few rows then always holds both classes (every model is defined on it) and the
        spread between subsets comes from which rows were drawn, not from how many of
        each class. False: the first ``size`` rows in hash order, whatever their labels.
    key : str, optional
        An integer column (a row id) whose portable hash orders the rows (the same
        subsets on every engine); default, on DuckDB only: a hash of every column.

    Returns
    -------
    list of dict
        One row per (model, size, repeat): ``model``, ``size``, ``repeat``, ``error``
        (1 − accuracy on the test rows, None when undefined), ``log_loss`` and ``reason``.
    """
    engine = as_engine(con)
    models = list(models) if models is not None else list(DEFAULT_MODELS if engine.dialect == "duckdb"
                                                          else ENGINE_MODELS)
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SqlnbError(f"unknown model {unknown[0]!r}{suggest(unknown[0], MODELS)}; models are: {', '.join(MODELS)}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise SqlnbError(f"repeats must be a positive integer, not {repeats!r}")
    if engine.dialect != "duckdb" and "logistic" in models:
        raise SqlnbError(f"logistic regression is fitted in Python on the training rows; on {engine.dialect} "
                         f"learning curves compare {', '.join(ENGINE_MODELS)} (leave out logistic, or use DuckDB)")
    con = engine
    train_src, test_src = (engine.resolve(read_with(d, keep_text=(label,))) for d in (train, test))
    check_key(train_src, key, engine.dialect)
    n = _count(con, train_src)
    sizes = default_sizes(n) if sizes is None else sorted({int(s) for s in sizes})
    if not sizes or sizes[0] < 1 or sizes[-1] > n:
        raise SqlnbError(f"training sizes must be between 1 and the {n} training rows, not {sizes}")
    opts = {m: {**DEFAULT_OPTIONS.get(m, {}), **dict((options or {}).get(m, {}))} for m in models}
    counts = class_counts(con, train_src, label) if stratify else None
    rows = []
    for size in sizes:
        quotas = class_quotas(counts, size) if counts is not None else None
        for r in range(repeats):
            sample = subsample(train_src, size, seed + r, quotas, label, key)
            shared: dict = {}
            for m in models:
                row = {"model": m, "size": size, "repeat": r, "error": None, "log_loss": None, "reason": None}
                try:
                    model = _fit(con, sample, label, m, features, exclude, opts[m], shared)
                    ev = evaluate_fold(con, model, test_src, label)
                    row.update(error=1.0 - ev["accuracy"], log_loss=ev["log_loss"])
                except SqlnbError as e:
                    row["reason"] = str(e)
                rows.append(row)
    return rows


def _fit(con, sample: Source, label: str, model: str, features, exclude, options: dict, shared: dict):
    """Fit one model kind on ``sample``; LDA and QDA share one moments scan (``shared``)."""
    options = dict(options)
    if "features" in options:
        features, exclude = options.pop("features"), None
    if model not in ("lda", "qda"):
        return fit(sample, label, con=con, model=model, features=features, exclude=exclude, **options)
    feats = dense.plan_features(sample, label, features, exclude, model.upper())
    key = tuple(feats)
    if key not in shared:
        shared[key] = collect_moments(con, sample, label, list(feats))[1][None]
    priors = options.pop("priors", None)
    cls = LDA if model == "lda" else QDA
    return cls(label, sample.columns[label], feats, shared[key], priors,
               {"source": sample.description, "rows": shared[key].n_rows}, **options)


def summarize(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Per (model, size): ``mean_error``, ``std_error`` and ``mean_log_loss`` over the
    defined repeats, ``runs`` (defined) and ``undefined`` (count)."""
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["model"], r["size"]), []).append(r)
    out = []
    for (m, size), rs in groups.items():
        errs = [r["error"] for r in rs if r["error"] is not None]
        losses = [r["log_loss"] for r in rs if r["log_loss"] is not None]
        out.append({"model": m, "size": size, "runs": len(errs), "undefined": len(rs) - len(errs),
                    "mean_error": float(np.mean(errs)) if errs else None,
                    "std_error": float(np.std(errs)) if errs else None,
                    "mean_log_loss": float(np.mean(losses)) if losses else None})
    return out


def markdown_table(summary: Sequence[Mapping[str, Any]], labels: Mapping[str, str] | None = None) -> str:
    """Sizes down, model kinds across: mean test error ± std over repeats (— undefined).

    ``labels`` names the columns (default :data:`LABELS`; any other key shows as is)."""
    labels = {**LABELS, **dict(labels or {})}
    models = list(dict.fromkeys(s["model"] for s in summary))
    sizes = sorted({s["size"] for s in summary})
    cell = {(s["model"], s["size"]): s for s in summary}
    lines = ["| training rows | " + " | ".join(labels.get(m, m) for m in models) + " |",
             "|---:|" + "---:|" * len(models)]
    for size in sizes:
        vals = []
        for m in models:
            s = cell.get((m, size))
            if s is None or s["mean_error"] is None:
                vals.append("—")
            else:
                part = "" if not s["undefined"] else f" ({s['runs']} of {s['runs'] + s['undefined']})"
                vals.append(f"{100 * s['mean_error']:.1f} ± {100 * s['std_error']:.1f}{part}")
        lines.append(f"| {size} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def _nice_step(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def svg_plot(summary: Sequence[Mapping[str, Any]], title: str, path: str | None = None,
             width: int = 720, height: int = 440, labels: Mapping[str, str] | None = None,
             colours: Mapping[str, str] | None = None) -> str:
    """Mean test error (%) against training rows (log scale), one line per model kind,
    ±1 std as whiskers. Returns the SVG text and writes it to ``path`` if given.
    ``labels`` and ``colours`` extend :data:`LABELS` and :data:`COLOURS`."""
    labels = {**LABELS, **dict(labels or {})}
    colours = {**COLOURS, **dict(colours or {})}
    models = list(dict.fromkeys(s["model"] for s in summary))
    pts = [s for s in summary if s["mean_error"] is not None]
    if not pts:
        raise SqlnbError("nothing to plot: every fit was undefined")
    left, right, top, bottom = 64, 220, 40, 52
    pw, ph = width - left - right, height - top - bottom
    xs = [math.log10(s["size"]) for s in pts]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    hi = max(100 * (s["mean_error"] + s["std_error"]) for s in pts)
    lo = min(100 * max(s["mean_error"] - s["std_error"], 0.0) for s in pts)
    step = _nice_step(hi - lo if hi > lo else 1.0)
    y0, y1 = math.floor(lo / step) * step, math.ceil(hi / step) * step
    if y1 == y0:
        y1 = y0 + step

    def X(size: float) -> float:
        return left + (math.log10(size) - x0) / (x1 - x0) * pw

    def Y(pct: float) -> float:
        return top + (y1 - pct) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left + pw / 2:.1f}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    # Grid and axes: y every `step` percent, x at 1-2-5 multiples of powers of ten.
    y = y0
    while y <= y1 + 1e-9:
        out.append(f'<line x1="{left}" y1="{Y(y):.1f}" x2="{left + pw}" y2="{Y(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{Y(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        y += step
    for e in range(math.floor(x0), math.ceil(x1) + 1):
        for mult in (1, 2, 5):
            v = mult * 10 ** e
            if x0 - 1e-9 <= math.log10(v) <= x1 + 1e-9:
                out.append(f'<line x1="{X(v):.1f}" y1="{top}" x2="{X(v):.1f}" y2="{top + ph}" stroke="#eee"/>')
                out.append(f'<text x="{X(v):.1f}" y="{top + ph + 16}" text-anchor="middle">{v:g}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 12}" text-anchor="middle">'
               'training rows (log scale)</text>')
    out.append(f'<text transform="translate(16 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
               'test error (%)</text>')
    for i, m in enumerate(models):
        colour = colours.get(m, "#555")
        mine = sorted((s for s in pts if s["model"] == m), key=lambda s: s["size"])
        if not mine:
            continue
        line = " ".join(f"{X(s['size']):.1f},{Y(100 * s['mean_error']):.1f}" for s in mine)
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for s in mine:
            cx, cy = X(s["size"]), Y(100 * s["mean_error"])
            lo_, hi_ = Y(100 * max(s["mean_error"] - s["std_error"], 0.0)), Y(100 * (s["mean_error"] + s["std_error"]))
            out.append(f'<line x1="{cx:.1f}" y1="{lo_:.1f}" x2="{cx:.1f}" y2="{hi_:.1f}" stroke="{colour}" '
                       'stroke-opacity="0.5"/>')
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{colour}"/>')
        ly = top + 14 + 20 * i
        out.append(f'<line x1="{left + pw + 14}" y1="{ly}" x2="{left + pw + 40}" y2="{ly}" stroke="{colour}" '
                   'stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 46}" y="{ly + 4}">{escape(labels.get(m, m))}</text>')
    out.append("</svg>")
    text = "\n".join(out) + "\n"
    if path is not None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    return text
