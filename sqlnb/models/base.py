"""What every model kind shares: scoring a source in SQL, exporting the scoring SELECT,
and saving to a DuckDB database.

A model kind (naive Bayes, LDA, QDA, logistic regression) only provides one SQL
score per class, as a sum of terms (:meth:`Model.class_terms`), and its parameter tables; the
log-sum-exp, probabilities and argmax come from :mod:`sqlnb.models.finish` for all of them.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.errors import SqlnbError, suggest
from sqlnb.sql.types import is_numeric, is_text_type
from sqlnb.models.decision import DecisionRule
from sqlnb.models.explain import check_explain, explanation
from sqlnb.models.calibration import Calibration
from sqlnb.models.conformal import ConformalSets, no_sets_error
from sqlnb.models.finish import DEFAULT_OUTPUTS, ClassScore, class_columns, scoring_select
from sqlnb.source import Query, Source, Table, guess, parse_query, read_with, resolve
from sqlnb.store import save_model

#: Default source table name of an exported scoring query (``to_sql`` without a source).
DEFAULT_SOURCE = "input"


class Model:
    """Base class of all model kinds.

    Attributes
    ----------
    label : str
        The label column the model was trained on.
    label_type : str
        Its SQL type (DuckDB spelling).
    classes : list
        Class labels in sorted order.
    report : dict
        How the model was fitted (rows, skipped rows, source, seconds, versions).
    decision : DecisionRule or None
        How the prediction is chosen from the probabilities (costs, a threshold, a reject
        option; :mod:`sqlnb.models.decision`); None for the most probable class. Stored
        with the model and used by every scoring query.
    """

    kind: str = ""
    decision: DecisionRule | None = None
    label: str
    label_type: str
    classes: list
    report: dict
    #: A fitted calibrator (:mod:`sqlnb.models.calibration`) applied whenever the model
    #: scores; stored with the model. A model derived from another (update, new
    #: hyperparameters) starts without one: it was fitted to the other's scores.
    calibration: Calibration | None = None
    #: Conformal prediction sets (:mod:`sqlnb.models.conformal`) added to its predictions
    #: whenever it scores; stored with the model. Dropped like the calibrator.
    conformal: ConformalSets | None = None

    # -- what a kind provides ---------------------------------------------------------
    @property
    def feature_names(self) -> list[str]:
        raise NotImplementedError

    def column_types(self) -> dict[str, str]:
        """The type each feature column was fitted with, and the label's when it is text:
        CSV and JSON sources are read with them (:func:`sqlnb.source.read_with`). A
        numeric label is left as read, so that a label that is not a number is reported
        as a label the model never saw, not as a conversion error."""
        features = getattr(self, "features", {})
        if isinstance(features, Mapping):  # the dense kinds: name -> type
            types = dict(features)
        else:  # naive Bayes: Feature objects
            types = {f.name: f.sql_type for f in features}
        if is_text_type(self.label_type):
            types[self.label] = self.label_type
        return types

    def read_types(self) -> dict[str, str]:
        """The types to read a CSV or JSON source with for scoring: :meth:`column_types`,
        except that a categorical feature fitted as a number is read as text whatever the
        sniffer guessed. The scoring SQL casts it to the fitted type with ``TRY_CAST``, so
        ``07`` is still 7, and a value that does not cast (``x`` in a column of integers,
        wherever in the file it is) is an unseen category, as the README promises, instead
        of the reader's conversion error. Fitting and updating read with
        :meth:`column_types`: there such a value cannot be stored as a category."""
        types = self.column_types()
        for f in getattr(self, "features", ()):
            if getattr(f, "kind", None) == "categorical" and f.bag is None and is_numeric(f.sql_type):
                types[f.name] = "VARCHAR"
        return types

    def numeric_features(self) -> list[str]:
        """Features whose scoring needs a numeric (or boolean) column."""
        return list(self.feature_names)

    def class_terms(self, input_types: Mapping[str, str] | None = None,
                    dialect: str | None = None) -> list[ClassScore]:
        """One score per class (in ``classes`` order) over the source alias ``src``, as a
        sum of terms: its log joint probability, or any score equal to it up to a per-row
        constant. The terms let the scoring SELECT cut a long sum into parts where the
        engine needs that (:func:`sqlnb.models.finish.shares_subexpressions`).

        ``input_types`` are the scored source's column types when known (a value is read
        with the type the model was fitted with, and NaN counts as missing whenever the
        input can hold it); ``dialect="duckdb"`` lets a kind use DuckDB-only lookups that
        keep the row order (no join). Kinds that need neither ignore them."""
        raise NotImplementedError

    def class_scores(self, input_types: Mapping[str, str] | None = None,
                     dialect: str | None = None) -> list[exp.Expression]:
        """:meth:`class_terms`, each class score as one expression."""
        return [t.expression() for t in self.class_terms(input_types, dialect)]

    def feature_terms(self, input_types: Mapping[str, str] | None = None,
                      dialect: str | None = None) -> list:
        """Per class, its score as a base term plus one term per feature (in
        ``feature_names`` order), each built as in :meth:`class_terms`: what explanations
        rank (:mod:`sqlnb.models.explain`). A list of
        :class:`~sqlnb.models.explain.FeatureTerms`."""
        raise SqlnbError(f"explanations (--explain) are not defined for {self.kind} models")

    def fast_class_scores(self, input_types: Mapping[str, str] | None = None,
                          dialect: str | None = None) -> list[ClassScore] | None:
        """Optionally, cheaper class scores that equal :meth:`class_terms` on every row
        where they are not NaN (e.g. without per-term NaN guards), term by term; None if
        there are none. The DuckDB scoring query then evaluates ``CASE WHEN isnan(fast)
        THEN exact ELSE fast END`` per class (:func:`sqlnb.models.finish.scoring_select`)."""
        return None

    def score_prelude(self, input_types: Mapping[str, str] | None = None,
                      dialect: str | None = None) -> list[tuple[str, exp.Expression]]:
        """Helper columns ``(name, expression over src)`` computed once per row before the
        class scores, which read them as ``src.name``; none by default. Must match
        :meth:`class_terms` called with the same arguments."""
        return []

    def combiner(self) -> Any:
        """The stages from member scores to class scores of an ensemble
        (:class:`~sqlnb.models.naive_bayes.eskdb.Combiner`), whose :meth:`class_terms` are
        then its members' raw scores; None (the class terms are the class scores)."""
        return None

    def score_joins(self, dialect: str | None = None,
                    input_types: Mapping[str, str] | None = None) -> list[exp.Join]:
        """Lookups the class scores read from (LEFT JOINs to the source); none by default.
        Must match :meth:`class_scores` called with the same ``dialect``; ``input_types``
        as for :meth:`class_terms`."""
        return []

    # -- scoring ------------------------------------------------------------------------
    def check_dialect(self, dialect: str) -> None:
        """Raise a one-line error when this model's scoring SQL cannot run in ``dialect``."""

    def check_source(self, source: Source) -> None:
        """Raise a one-line error when ``source`` cannot be scored by this model."""
        for name in self.feature_names:
            if name not in source.columns:
                source.require([name], "model feature column")
        for name in self.numeric_features():
            t = source.columns[name]
            if not (is_numeric(t) or t.upper() == "BOOLEAN"):
                raise SqlnbError(
                    f"column {name!r} in {source.description} has type {t}, but the model "
                    "scores it as a number; cast it or fix the data"
                )

    def scoring_query(
        self,
        source: Source | None = None,
        outputs: Sequence[str] = DEFAULT_OUTPUTS,
        keep: Sequence[str] | None = None,
        source_from: exp.Expression | None = None,
        nan_gate: bool = False,
        dialect: str = "duckdb",
        key: str | None = None,
        explain: int | None = None,
        calibrated: bool = True,
        set_format: str | None = None,
    ) -> exp.Select:
        """The scoring SELECT as a sqlglot tree.

        Parameters
        ----------
        source : Source, optional
            A resolved source; its columns are passed through (or those in ``keep``).
        outputs : list of str
            Any of ``jll``, ``log_evidence``, ``log_proba``, ``proba``, ``prediction``.
        keep : list of str, optional
            Source columns to keep (default all).
        source_from : sqlglot expression, optional
            A FROM item aliased ``src`` whose columns are unknown (export to another
            warehouse); then every source column is passed through.
        nan_gate : bool
            Score with :meth:`fast_class_scores` where a model has them, falling back to
            the guarded scores only on rows where the fast ones are NaN. It relies on the
            engine computing the repeated fast expression once (DuckDB's common
            subexpression elimination does), so only DuckDB scoring uses it; exported SQL
            keeps the plainer guarded form.
        dialect : str
            Where the SELECT will run. In DuckDB every output keeps the source's row order:
            lookups that need no join are used where a kind has them, and when a join is
            still in the plan (token bags) each row carries its position and the SELECT
            ends with ``ORDER BY`` it. Other engines promise no order (name a key column).
        key : str, optional
            A source column carried into the output (whatever ``keep`` says) and ordered by
            at the end: what joins predictions back to their rows where the engine, or a
            query the SELECT is pasted into, keeps no order.
        explain : int, optional
            Add the ``explain`` features that most moved each row's decision, as columns
            ``reason_1 ..`` and ``reason_1_weight ..`` (:mod:`sqlnb.models.explain`).
        calibrated : bool
            Apply the model's calibrator, if it has one (:attr:`calibration`); its scores
            are then the calibrated ones (``jll_*``, ``log_evidence``). False gives the
            model's own scores (e.g. ln p(x) for novelty).
        set_format : {"list", "flags"}, optional
            How the :attr:`conformal` set comes out: ``list`` (``prediction_set``, where the
            dialect has lists: DuckDB's default) or ``flags`` (``in_set_<class>``, one
            BOOLEAN per class: the default elsewhere, and cheaper to write to Parquet).
        """
        self.check_dialect(dialect)
        sets = self.conformal if calibrated else None
        if set_format is not None:
            if self.conformal is None:
                raise no_sets_error(set_format)
            sets = sets.formatted(set_format) if sets is not None else None
        if explain is not None:
            check_explain(self, explain)
            if calibrated and self.calibration is not None:
                # The reasons add up to the model's own score differences; a calibrator's
                # scores (T·b, Platt's or isotonic's log-odds) are not sums over the features.
                raise SqlnbError("explanations are of the model's own scores, and this model has a calibrator; "
                                 "explain with the uncalibrated model (sqlnb calibrate --clear, or a copy)")
        if key is not None and keep is not None and key not in keep:
            keep = [key, *keep]
        if source is not None:
            if key is not None:
                source.require([key], "key column")
            self.check_source(source)
            if keep is not None:
                source.require(keep, "column to keep")
            source_from = source.from_("src")
            columns = list(source.columns)
        elif source_from is None:
            raise ValueError("give a source")
        else:
            columns = None
        types = source.types_for(dialect) if source is not None else None
        exact = self.class_terms(types, dialect)
        fast = self.fast_class_scores(types, dialect) if nan_gate else None
        joins = self.score_joins(dialect, types)
        extension = explanation(self, explain, types, dialect) if explain is not None else None
        return scoring_select(
            source_from, exact if fast is None else fast, self.classes, self.label_type, columns, outputs, keep,
            joins=joins, fallback=None if fast is None else exact, prelude=self.score_prelude(types, dialect),
            keep_order=bool(joins) and dialect == "duckdb" and key is None, order_key=key, dialect=dialect,
            decision=self.decision,
            extension=extension,
            calibration=self.calibration if calibrated else None,
            conformal=sets,
            combiner=self.combiner(),
        )

    @sql.trees_collected_by_refcount
    def score(
        self,
        data: Any,
        con: duckdb.DuckDBPyConnection | None = None,
        outputs: Sequence[str] = DEFAULT_OUTPUTS,
        keep: Sequence[str] | None = None,
        key: str | None = None,
        explain: int | None = None,
        set_format: str | None = None,
    ) -> duckdb.DuckDBPyRelation:
        """Score ``data`` in DuckDB (or on the engine ``con``) and return the result.

        DuckDB gives a lazy relation, :class:`~sqlnb.engines.SparkEngine` a lazy
        DataFrame, :class:`~sqlnb.engines.PostgresEngine` a pyarrow table.

        The relation holds the source's columns (or ``keep``), ``proba_<class>`` per class
        and ``prediction`` — the same default as ``sqlnb score`` — or the groups named in
        ``outputs`` (:data:`~sqlnb.models.finish.OUTPUTS`: the per-class joint
        log-likelihoods ``jll``, ``log_evidence`` (ln p(x)), ``log_proba``, ``proba``,
        ``prediction``). Under a
        :attr:`decision` rule ``prediction`` is the rule's, followed by ``expected_cost``
        (and ``rejected``).

        In DuckDB the rows come back once each, in the source's order. PostgreSQL and
        Spark keep no order: give ``key``, a column carried into the result and sorted on.
        ``explain=K`` adds ``reason_1 .. reason_K`` and their ``reason_<i>_weight``
        (:mod:`sqlnb.models.explain`). A model with :attr:`conformal` sets adds
        ``prediction_set`` (a list) and ``set_size`` in DuckDB, ``in_set_<class>`` and
        ``set_size`` elsewhere; ``set_format="flags"`` gives the flags in DuckDB too.

        Without ``con`` the query runs on a new in-memory DuckDB connection with the
        progress bar off (:func:`sqlnb.engines.duckdb.new_connection`); a connection passed
        in keeps its own settings.
        """
        engine = as_engine(con, data)  # DuckDB by default (a relation: its own); PostgresEngine, ...
        source = engine.resolve(read_with(data, self.read_types()))
        return engine.relation(self.scoring_query(source, outputs, keep, nan_gate=engine.dialect == "duckdb",
                                                  dialect=engine.dialect, key=key, explain=explain,
                                                  set_format=set_format))

    def predict(self, data: Any, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """Source columns plus ``prediction``."""
        return self.score(data, con, outputs=("prediction",))

    def predict_proba(self, data: Any, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """One ``proba_<class>`` column per class (and nothing else), row for row."""
        return self.score(data, con, outputs=("proba",), keep=[])

    def predict_log_proba(self, data: Any, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """One ``log_proba_<class>`` column per class, row for row."""
        return self.score(data, con, outputs=("log_proba",), keep=[])

    def proba_columns(self) -> list[str]:
        return class_columns("proba_", self.classes)

    @sql.trees_collected_by_refcount
    def to_sql(
        self,
        dialect: str = "duckdb",
        source: Any = None,
        con: duckdb.DuckDBPyConnection | None = None,
        outputs: Sequence[str] = DEFAULT_OUTPUTS,
        pretty: bool = True,
        key: str | None = None,
        explain: int | None = None,
        set_format: str | None = None,
    ) -> str:
        """The self-contained scoring SELECT (parameters inlined as DOUBLE literals).

        One SELECT, so it cannot carry a setting: run PostgreSQL's in a session with
        ``SET jit = off`` (a server's default JIT can spend minutes and gigabytes compiling
        a wide model's SELECT on a large table; docs/dialects.md, "PostgreSQL's JIT").

        Parameters
        ----------
        dialect : str
            Target dialect (see :data:`sqlnb.sql.DIALECTS`).
        source : str or Table or Query, optional
            The table or query to score (default: a table named ``input``). When ``con``
            can resolve it, its columns are listed explicitly; otherwise they are passed
            through with ``*``.
        con : duckdb connection, optional
            Used to resolve ``source``'s columns.
        key : str, optional
            A source column to carry and order by (see :meth:`scoring_query`): join the
            predictions back on it where the engine keeps no row order.
        explain : int, optional
            Add the ``explain`` reasons per row (see :meth:`scoring_query`).
        set_format : {"list", "flags"}, optional
            How conformal sets come out (see :meth:`scoring_query`).
        """
        if dialect not in sql.DIALECTS:
            raise SqlnbError(
                f"unknown dialect {dialect!r}{suggest(dialect, sql.DIALECTS)}; "
                f"choose one of: {', '.join(sql.DIALECTS)}"
            )
        spec = guess(source if source is not None else Table(DEFAULT_SOURCE))
        resolved = None
        if con is not None:
            try:
                resolved = resolve(spec, con)
            except SqlnbError:
                resolved = None
        if resolved is not None:
            tree = self.scoring_query(resolved, outputs, dialect=dialect, key=key, explain=explain,
                                      set_format=set_format)
        else:
            if isinstance(spec, Query):
                node: exp.Expression = exp.Subquery(this=parse_query(spec.text, dialect),
                                                    alias=exp.TableAlias(this=sql.ident("src")))
            elif isinstance(spec, Table):
                node = exp.alias_(sql.table(spec.name, spec.schema, spec.catalog), "src", table=True, quoted=True)
            else:
                raise SqlnbError(f"cannot export a scoring query over {spec!r}; give a table name or a query")
            tree = self.scoring_query(None, outputs, source_from=node, dialect=dialect, key=key, explain=explain,
                                      set_format=set_format)
        return sql.render(tree, dialect, pretty=pretty)

    # -- storage ------------------------------------------------------------------------
    def save(self, target: Any, name: str, replace: bool = False, wait: float | None = None) -> None:
        """Save the model as tables under ``name`` in a DuckDB database.

        ``target`` is a connection or a database file path (created when missing). The
        write is one transaction: an existing model is replaced only with
        ``replace=True``, and a failure leaves the database as it was. While another
        process reads or writes the file, the save waits up to ``wait`` seconds (default
        60; docs/concurrency.md).
        """
        save_model(self, target, name, replace, wait=wait)

    # -- hooks for the store ------------------------------------------------------------
    def decision_from_dict(self, stored: dict) -> DecisionRule:
        """The :attr:`decision` rule stored in the metadata (``DecisionRule.to_dict``)."""
        return DecisionRule.from_dict(stored, self.classes)

    def metadata(self) -> dict:
        raise NotImplementedError

    def parameter_tables(self) -> dict[str, Any]:
        """Part name -> pyarrow table, written as ``sqlnb."m_<id>_<part>"``."""
        raise NotImplementedError

    @classmethod
    def from_tables(cls, meta: dict, tables: dict[str, Any]) -> "Model":
        raise NotImplementedError

    @classmethod
    def from_stored(cls, meta: dict, tables: dict[str, Any]) -> "Model":
        """:meth:`from_tables`, with what any kind may store besides its parameters: a
        calibrator (:meth:`Calibration.tables`, written by :func:`sqlnb.store.save_model`)."""
        model = cls.from_tables(meta, tables)
        model.calibration = Calibration.from_tables(tables)
        model.conformal = ConformalSets.from_tables(tables)
        return model
