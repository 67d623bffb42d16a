"""The Python API: fit a model on a source, load and list saved models.

Data flow::

    source ──fit.statistics_query──▶ Statistics ──Hyperparameters──▶ log-parameters
           (one GROUP BY scan)        (parameter tables)              ──score.scoring_select──▶ predictions
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

import duckdb

from sqlnb import sql
from sqlnb.models import dense
from sqlnb.models.discriminant import LDA, QDA, collect_moments
from sqlnb.engines import as_engine
from sqlnb.engines.duckdb import new_connection
from sqlnb.engines.waiting import retry_locked
from sqlnb.errors import SqlnbError, VarianceFloorWarning, shell_word, suggest, warn
from sqlnb.models import screening
from sqlnb.source import read_with
from sqlnb.models.naive_bayes import eskdb, information, kdb, mixture, skdb, tan
from sqlnb.models.naive_bayes.families.gaussian import floor_lifter
from sqlnb.models.naive_bayes.fit import collect_statistics, cut_counts, plan_features, resolve_edges
from sqlnb.models.logistic import Logistic
from sqlnb.models.naive_bayes import text as bags
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes
from sqlnb.models.naive_bayes import weighted
from sqlnb import store

#: Model kinds :func:`fit` can build (``model=``); ``kind=`` stays the naive Bayes family.
MODELS = ("naive_bayes", "weighted", "lda", "qda", "logistic")


@sql.trees_collected_by_refcount
def fit(
    data: Any,
    label: str,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    model: str = "naive_bayes",
    kind: str = "auto",
    feature_kinds: Mapping[str, str] | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    weight: str | None = None,
    binarize: float | Mapping[str, float] = 0.0,
    text: Any = None,
    keep_columns: Sequence[str] | None = None,
    screen: bool = True,
    bins: str | Mapping[Any, str] | None = None,
    select_k: int | None = None,
    floor_note: bool = True,
    **hyperparameters: Any,
) -> NaiveBayes:
    """Fit a classifier in the database: naive Bayes (default), LDA, QDA or logistic regression.

    Parameters
    ----------
    data : str, Table, Query, Files, path, relation or Arrow table
        The training rows: a table or view name, a SQL query, or Parquet/CSV/JSON files
        by path or glob. Only aggregates leave the database.
    label : str
        The label column; rows where it is NULL are skipped and counted.
    con : duckdb connection or Engine, optional
        A connection that can see ``data`` (default: a new in-memory one, enough for files,
        with DuckDB's progress bar off: :func:`sqlnb.engines.duckdb.new_connection`), or an
        engine (:class:`~sqlnb.engines.PostgresEngine`, :class:`~sqlnb.engines.SparkEngine`)
        to fit naive Bayes there. A connection passed in keeps its own settings (its
        progress bar shows if it is on).
    model : {"naive_bayes", "weighted", "lda", "qda", "logistic"}
        The model kind. ``"weighted"`` is naive Bayes whose log-probabilities carry weights
        learnt by minimising the conditional log loss with an L2 penalty ``l2`` towards 1
        (in ``**hyperparameters``; default: chosen by 5-fold cross-validation on the
        training rows), over discrete features (numeric columns binned, ``bins="mdl"``
        unless given): :mod:`sqlnb.models.naive_bayes.weighted`. The others dispatch to :func:`fit_lda`, :func:`fit_qda` and
        :func:`fit_logistic`, whose parameters (``shrinkage``, ``priors``, ``reg_param``,
        ``C``, ``standardize``) then go in ``**hyperparameters``; ``kind``,
        ``feature_kinds``, ``weight`` and ``binarize`` are naive Bayes only.
    kind : str
        Family of every feature (``auto`` picks one from each column's type).
    feature_kinds : mapping, optional
        Per-column family overrides.
    features, exclude : list of str, optional
        Which columns are features (default: all but the label and weight, screened).
    keep_columns : list of str, optional
        Columns to keep although screening would leave them out. Without ``features``,
        identifiers (by their values: integers with 90% distinct values, text categories
        with more than 50%; by their name, ``*_id``, with 50%) and constant columns whose
        removal changes no probability (Gaussian, categorical, binned; constant
        multinomial, complement and Bernoulli columns stay) are left out, each with a
        :class:`~sqlnb.errors.ScreeningWarning` and a line in ``model.report
        ["screened"]`` (:mod:`sqlnb.models.screening`). A Gaussian column whose variance
        lifts the variance floor above other columns' variances is named in a
        :class:`~sqlnb.errors.VarianceFloorWarning`.
    screen : bool
        False: no screening (every column but the label and weight is a feature).
    weight : str, optional
        A column of non-negative row weights.
    binarize : float or mapping
        Bernoulli threshold (``x > threshold`` is present), per column or for all.
    text : TextOptions, dict, or mapping of column to either, optional
        Tokenizer and vocabulary options of token-bag columns (text, ``VARCHAR[]`` or
        ``MAP`` columns given kind multinomial, bernoulli or complement): ``token_pattern``,
        ``lowercase``, ``stop_words``, ``min_df``, ``max_df``, ``max_features``,
        ``select_k`` (see :mod:`sqlnb.models.naive_bayes.text`).
    bins : str or mapping, optional
        Discretise numeric columns into ``binned`` features: ``"mdl"`` (Fayyad & Irani)
        or ``"quantile:K"`` for every numeric column without a kind of its own, or a
        mapping column -> spec (its key ``None``: every other numeric column). Cut points
        are computed in the database and stored with the model
        (:mod:`sqlnb.models.naive_bayes.binning`).
    select_k : int, optional
        Keep the K features of highest mutual information with the class, computed from
        the training scan's statistics (:func:`sqlnb.models.naive_bayes.information.select_k`):
        categorical, binned and bernoulli columns and token-bag terms compete in one
        ranking (ties by name); Gaussian and count columns are kept.
    floor_note : bool
        False: no :class:`~sqlnb.errors.VarianceFloorWarning` (the scikit-learn
        estimators, whose users give no ``--features``, say it their own way:
        :mod:`sqlnb.estimators.naive_bayes`).
    **hyperparameters
        Fields of :class:`~sqlnb.models.naive_bayes.model.Hyperparameters` (``alpha``,
        ``estimator``, ``class_prior``, ``var_smoothing``, ...; ``structure="tan"``:
        tree-augmented naive Bayes, :mod:`sqlnb.models.naive_bayes.tan`).

    Returns
    -------
    NaiveBayes, WeightedNaiveBayes, LDA, QDA or Logistic

    Examples
    --------
    >>> import sqlnb
    >>> model = sqlnb.fit("train.parquet", label="y")          # doctest: +SKIP
    >>> model.predict_proba("test.parquet").to_arrow_table()   # doctest: +SKIP
    >>> sqlnb.fit("train.parquet", label="y", model="lda", shrinkage=0.1)  # doctest: +SKIP
    """
    if model not in ("naive_bayes", "weighted"):
        if model not in _DENSE:
            raise SqlnbError(f"unknown model {model!r}{suggest(model, MODELS)}; models are: {', '.join(MODELS)}")
        check_naive_bayes_only(model, kind=kind, feature_kinds=feature_kinds, weight=weight, binarize=binarize,
                               text=text, bins=bins, select_k=select_k)
        return _DENSE[model](data, label, con=con, features=features, exclude=exclude, keep_columns=keep_columns,
                             screen=screen, **hyperparameters)
    l2 = hyperparameters.pop("l2", None)
    if model == "weighted" and bins is None:
        bins = "mdl"  # the weighted model's features are discrete: numeric columns binned by MDL
    elif model != "weighted" and l2 is not None:
        raise SqlnbError("l2 is the penalty of the weights of model 'weighted'; fit model='weighted' to use it")
    hyper = Hyperparameters(**hyperparameters)
    engine = as_engine(con, data)  # a DuckDB connection, an engine (sqlnb.engines), or None
    start = time.perf_counter()
    source = engine.resolve(read_with(data, keep_text=(label,)))
    # Text columns are screened as categories only where they would be categorical (not bags);
    # a column given a kind is a column asked for.
    screened = screening.screen_plan(engine, source, label, weight, features, exclude, keep_columns, screen,
                                     numeric_only=kind not in ("auto", "categorical"),
                                     asked=list(feature_kinds or {}),
                                     naive_bayes=[{"kind": kind, "feature_kinds": feature_kinds, "bins": bins,
                                                   "unseen": hyper.unseen, "structure": hyper.structure}])
    exclude = [*(exclude or ()), *(s.column for s in screened)] or None
    if model == "weighted" and kind == "auto":  # booleans as categories of two values
        feature_kinds = weighted.boolean_categories(source.columns, label, weight, features, exclude, feature_kinds)
    feats = plan_features(source, label, weight, kind, feature_kinds, features, exclude, binarize, text, bins)
    if model == "weighted":  # what the weights cannot take is refused before any scan
        weighted.check_features(feats, hyper.structure)
    # Binned columns: their per-(class, value) counts, then the cut points from them; the
    # model keeps the counts so that an update recomputes the cut points (fit.recut).
    cut_classes, cuts = cut_counts(engine, source, label, weight, feats)
    feats = resolve_edges(engine, source, label, feats, cuts)
    stats = collect_statistics(engine, source, label, feats, weight, pairs=tan.needs_pairs(hyper.structure))
    stats.cuts = {name: vc.align(cut_classes, stats.classes) for name, vc in cuts.items()}
    if floor_note:
        _note_variance_floor(feats, stats, hyper.var_smoothing, listed=features is not None)
    report = _report(source, stats.n_rows, stats.null_label_rows, start, screened)
    if select_k is not None:
        feats, stats, report["select_k"] = information.select_k(feats, stats, select_k)
    if mixture.joint_order(hyper.structure):  # kdb:2 (alone or averaged): its joint counts (one more scan)
        stats = kdb.with_joints(engine, source, label, weight, feats, stats, mixture.joint_order(hyper.structure))
    if skdb.selective(hyper.structure) or eskdb.ensemble(hyper.structure):  # the rows as patterns (one more scan)
        stats = skdb.with_patterns(stats, feats, lambda tree, shim: weighted.read_patterns(
            engine, source, label, weight, tree, shim))
    nb = NaiveBayes(label, source.columns[label], feats, stats, hyper, report, weight)
    return weighted.fit(nb, engine, source, l2) if model == "weighted" else nb


#: The keyword arguments of :func:`fit` that apply to naive Bayes only, with their defaults.
NAIVE_BAYES_ONLY = {"kind": "auto", "feature_kinds": None, "weight": None, "binarize": 0.0, "text": None,
                    "bins": None, "select_k": None}


def check_naive_bayes_only(model: str, **given: Any) -> None:
    """Refuse, for ``model`` (LDA, QDA or logistic regression), the first argument of
    :data:`NAIVE_BAYES_ONLY` given another value than its default: one check for
    :func:`fit` and :func:`sqlnb.workflows.cv.cross_validate`."""
    nb_only = [name for name, default in NAIVE_BAYES_ONLY.items() if given.get(name, default) != default]
    if nb_only:
        raise SqlnbError(f"{nb_only[0]} applies to naive Bayes only, not to model {model!r}")


def _note_variance_floor(feats, stats, var_smoothing: float, listed: bool) -> None:
    """A note (:class:`~sqlnb.errors.VarianceFloorWarning`) when one Gaussian column's
    variance lifts the variance floor above other columns' own variances
    (:func:`~sqlnb.models.naive_bayes.families.gaussian.floor_lifter`): scikit-learn's
    model, so it is kept, but those columns barely count, which an ID read as a number
    causes."""
    found = floor_lifter(feats, stats.features, var_smoothing)
    if found is None:
        return
    top, var, eps, below = found
    shown = ", ".join(f"{name!r} {v:.3g}" for name, v in below[:3]) + (", ..." if len(below) > 3 else "")
    fix = ("drop it from --features (features= in Python)" if listed else
           f"leave it out with --exclude {shell_word(top)} (exclude=[{top!r}] in Python) or list the features")
    warn(f"note: column {top!r} (variance {var:.3g}) sets the Gaussian variance floor, var_smoothing × its "
                  f"variance = {eps:.3g}, above the variance of {len(below)} other column{'s' * (len(below) > 1)} "
                  f"({shown}), whose class densities it flattens; {fix}",
                  VarianceFloorWarning)


def _dense_start(data, label, con, features, exclude, keep_columns, screen, what):
    # Any engine: the moments aggregate runs where the data is (COVAR_POP exists in DuckDB,
    # PostgreSQL and Spark); logistic regression reads its rows through the engine once.
    from sqlnb.engines import as_engine
    engine = as_engine(con, data)  # a relation without con: its own connection
    source = engine.resolve(read_with(data, keep_text=(label,)))
    screened = screening.screen_plan(engine, source, label, None, features, exclude, keep_columns, screen,
                                     numeric_only=True)
    exclude = [*(exclude or ()), *(s.column for s in screened)] or None
    return engine, source, dense.plan_features(source, label, features, exclude, what), screened


def _report(source, rows: int, null_label_rows: int, start: float, screened=()) -> dict:
    report = {"source": source.description, "rows": rows, "null_label_rows": null_label_rows,
              "seconds": round(time.perf_counter() - start, 3)}
    if screened:
        report["screened"] = [s.to_dict() for s in screened]
    return report


def fit_lda(
    data: Any,
    label: str,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    keep_columns: Sequence[str] | None = None,
    screen: bool = True,
    shrinkage: float | None = None,
    priors: Any = None,
) -> LDA:
    """Fit linear discriminant analysis in the database (one aggregation scan).

    Parameters
    ----------
    data, label, con, keep_columns, screen
        As for :func:`fit`.
    features, exclude : list of str, optional
        Numeric (or boolean) feature columns (default: all but the label, screened as by
        :func:`fit`; any other type raises). Training rows must be complete: see
        :mod:`sqlnb.models.dense`.
    shrinkage : float in [0, 1], optional
        Shrink each class covariance towards ``(tr C / d)·I`` (scikit-learn's float
        ``shrinkage`` with ``solver='lsqr'``).
    priors : None, "uniform", mapping label -> probability, or sequence in class order
        Class priors (default: the class frequencies).

    Returns
    -------
    LDA
    """
    return _fit_discriminant(LDA, data, label, con, features, exclude, keep_columns, screen, priors,
                             shrinkage=shrinkage)


def fit_qda(
    data: Any,
    label: str,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    keep_columns: Sequence[str] | None = None,
    screen: bool = True,
    reg_param: float = 0.0,
    priors: Any = None,
) -> QDA:
    """Fit quadratic discriminant analysis in the database (one aggregation scan).

    Parameters are as for :func:`fit_lda`, except ``reg_param`` in [0, 1]: each class
    covariance becomes ``(1 − reg_param)·C_k + reg_param·I`` (scikit-learn's).

    Returns
    -------
    QDA
    """
    return _fit_discriminant(QDA, data, label, con, features, exclude, keep_columns, screen, priors,
                             reg_param=reg_param)


def _fit_discriminant(cls, data, label, con, features, exclude, keep_columns, screen, priors, **params):
    """LDA or QDA: plan the features, one moments scan, then the model (solved lazily)."""
    start = time.perf_counter()
    con, source, feats, screened = _dense_start(data, label, con, features, exclude, keep_columns, screen,
                                                cls.kind.upper())
    moments = collect_moments(con, source, label, list(feats))[1][None]
    return cls(label, source.columns[label], feats, moments, priors,
               _report(source, moments.n_rows, moments.null_label_rows, start, screened), **params)


def fit_logistic(
    data: Any,
    label: str,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    keep_columns: Sequence[str] | None = None,
    screen: bool = True,
    C: float = 1.0,
    standardize: bool = False,
) -> Logistic:
    """Fit L2-penalised logistic regression (rows read once into numpy, scored in SQL).

    Parameters
    ----------
    data, label, con, features, exclude, keep_columns, screen
        As for :func:`fit_lda`.
    C : float
        Inverse penalty strength, as scikit-learn's ``LogisticRegression(C=C)``.
    standardize : bool
        Fit on ``(x − mean)/std`` (as ``StandardScaler`` then ``LogisticRegression``);
        the scaling is folded into the SQL score. Default False: the data as given.

    Returns
    -------
    Logistic
    """
    start = time.perf_counter()
    con, source, feats, screened = _dense_start(data, label, con, features, exclude, keep_columns, screen,
                                                "logistic regression")
    labels, X, _, null_rows = dense.read_rows(con, source, label, feats)
    classes = dense.check_labels(dict.fromkeys(labels), label, source.description, null_rows)
    return Logistic.fit_arrays(label, source.columns[label], feats, labels, X, classes, C, standardize,
                               _report(source, len(labels), null_rows, start, screened))


_DENSE = {"lda": fit_lda, "qda": fit_qda, "logistic": fit_logistic}


def fit_long(tokens: Any, labels: Any, *, id: str, token: str, label: str, count: str | None = None,
             kind: str = "multinomial", con=None, weight: str | None = None, binarize: float = 0.0,
             text: Any = None, **hyperparameters: Any):
    """Fit a naive Bayes classifier on a long token table.

    Parameters
    ----------
    tokens : source
        One row per (document, token) with a count column, or one row per token
        occurrence (``count=None``). With a count column, give each (id, token) one row:
        duplicates add up in the counts but count twice in document frequencies.
    labels : source
        One row per document: ``id``, ``label`` (and ``weight``). Every labelled document
        is a document, also one without any token row.
    id, token, label, count : str
        Column names (``id`` in both sources).
    kind : {"multinomial", "bernoulli", "complement"}
    con : DuckDB connection, optional
    weight : str, optional
        Document weights, a column of ``labels``.
    binarize : float
        Bernoulli threshold on the counts (present when ``count > binarize``).
    text : TextOptions or dict, optional
        Vocabulary options (``min_df``, ``max_df``, ``max_features``, ``select_k``,
        ``stop_words``).
    **hyperparameters
        As for :func:`sqlnb.fit` (``alpha``, ``estimator``, ``class_prior``, ...).

    Returns
    -------
    NaiveBayes
        Score it with :meth:`NaiveBayes.score_long`.

    Examples
    --------
    >>> m = sqlnb.fit_long("tokens.parquet", "docs.parquet", id="doc_id", token="token",
    ...                    count="n", label="label")                       # doctest: +SKIP
    >>> m.score_long("test_tokens.parquet", "test_docs.parquet")          # doctest: +SKIP
    """
    if kind not in bags.BAG_KINDS:
        raise SqlnbError(f"kind {kind!r} cannot model a token table; choose one of: {', '.join(bags.BAG_KINDS)}")
    hyper = Hyperparameters(**hyperparameters)
    engine = as_engine(con)
    dcon = bags._duckdb(engine)
    start = time.perf_counter()
    tok_src, lab_src = engine.resolve(tokens), engine.resolve(labels)
    tok_src.require([id, token] + ([count] if count else []), "token table column")
    lab_src.require([id, label] + ([weight] if weight else []), "label table column")
    if count and not bags.is_numeric(tok_src.columns[count]):
        raise SqlnbError(f"count column {count!r} in {tok_src.description} has type "
                         f"{tok_src.columns[count]}; it must hold numbers")
    feature = bags.bag_feature(token, kind, tok_src.columns[token], float(binarize), text, layout="long",
                          id=id, token=token, count=count)
    stats = collect_statistics(engine, lab_src, label, [], weight)
    counts = bags.long_counts_query(tok_src, lab_src, feature, label, weight)
    stats.features[token] = bags.bag_statistics(dcon, counts, feature, stats.classes, stats.class_n,
                                           stats.class_rows, tok_src.description)
    report = {"source": f"{tok_src.description} + {lab_src.description}", "rows": stats.n_rows,
              "null_label_rows": stats.null_label_rows, "seconds": round(time.perf_counter() - start, 3)}
    return NaiveBayes(label, lab_src.columns[label], [feature], stats, hyper, report, weight)


def connect(
    path: str | os.PathLike | None = None,
    threads: int | None = None,
    memory_limit: str | None = None,
    temp_directory: str | os.PathLike | None = None,
    read_only: bool = False,
    wait: float | None = None,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with resource limits applied, and DuckDB's progress bar off, as
    on every connection sqlnb opens (``SET enable_progress_bar = true`` shows it).

    Parameters
    ----------
    path : str or path, optional
        A database file (created when missing unless ``read_only``); default in-memory.
    threads : int, optional
        Worker threads (DuckDB's default: one per core).
    memory_limit : str, optional
        DuckDB memory limit such as ``"4GB"``; larger intermediates spill to disk.
    temp_directory : str or path, optional
        Where DuckDB spills.
    read_only : bool
        Open ``path`` read-only (it must exist).
    wait : float, optional
        Seconds to wait while another process holds ``path`` (DuckDB lets one process
        write a file, or several read it, never both); default 60
        (:data:`sqlnb.engines.waiting.DEFAULT_WAIT`). See docs/concurrency.md.

    Raises
    ------
    SqlnbError
        One line naming the setting DuckDB rejected, or why the file cannot be opened
        (another process held it for longer than ``wait``: that process is named).

    Examples
    --------
    >>> con = sqlnb.connect(threads=2, memory_limit="1GB")        # doctest: +SKIP
    >>> model = sqlnb.fit("train.parquet", label="y", con=con)    # doctest: +SKIP
    """
    # Given as connection config rather than SET statements: DuckDB validates them before
    # the database is opened, so a bad value never leaves a half-configured connection.
    config = {key: value for key, value in (
        ("threads", None if threads is None else int(threads)),
        ("memory_limit", memory_limit),
        ("temp_directory", None if temp_directory is None else os.fspath(temp_directory)),
    ) if value is not None}
    database = ":memory:" if path is None else os.fspath(path)
    def open_it() -> duckdb.DuckDBPyConnection:
        return new_connection(database, read_only=read_only and path is not None, config=config)

    try:
        return open_it() if path is None else retry_locked(open_it, database, wait)
    except duckdb.Error as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        for key, value in config.items():
            try:  # find the setting DuckDB rejected, to name it
                duckdb.connect(config={key: value}).close()
            except duckdb.Error:
                raise SqlnbError(f"invalid {key.replace('_', ' ')} {value!r}: {reason}") from None
        if read_only and path is not None and not os.path.exists(database):
            raise SqlnbError(f"database {database!r} does not exist; check the path") from None
        raise SqlnbError(f"cannot open database {database!r}: {reason}") from None


def load(target: Any, name: str, wait: float | None = None):
    """Load a saved model.

    Parameters
    ----------
    target : str, path or duckdb connection
        The database holding the model.
    name : str
        The model's name.
    wait : float, optional
        Seconds to wait while another process writes the store (default 60; see
        docs/concurrency.md). The model read is the one before that write or after it.
    """
    return store.load_model(target, name, wait=wait)


def list_models(target: Any, wait: float | None = None) -> list[dict]:
    """The models saved in a database, one dict per model (``name``, ``kind``, ``created``,
    ``features``, ...), as ``sqlnb models`` lists them (``wait``: as in :func:`load`).

    It is ``sqlnb.list_models``; ``sqlnb.models`` is the package of model kinds
    (``sqlnb.models.NaiveBayes``, ...).
    """
    return store.list_models(target, wait=wait)


def drop(target: Any, name: str, wait: float | None = None) -> None:
    """Delete a saved model (``wait``: seconds to wait for another process's write or
    read of the store, default 60)."""
    store.drop_model(target, name, wait=wait)
