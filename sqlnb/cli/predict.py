"""Using a model on data: ``sqlnb score`` (rows to OUT or a table on the engine),
``sqlnb evaluate`` (metrics in SQL, a CI check) and ``sqlnb sql`` (the scoring SELECT,
the training SQL or a DuckDB macro, printed for another warehouse).
"""

from __future__ import annotations

import dataclasses
import os
from contextlib import nullcontext

import click
import duckdb
import sqlglot

from sqlnb import sql
from sqlnb.cli.app import EXIT_FAIL, Settings
from sqlnb.cli.decide import override_options, use_rule
from sqlnb.cli.io import bound_evaluate, bound_evaluate_again, bound_memory, dump_json, load, write_out, write_text_file
from sqlnb.cli.options import (source_options, data_spec, feature_options, feature_plan_args, format_option,
                               keep_columns, keep_option, label_option, model_location, model_option,
                               no_proba_option, out_option, outputs_option, replace_option, score_outputs,
                               set_format_option)
from sqlnb.errors import SqlnbError, suggest
from sqlnb.io import engine_output
from sqlnb.io.locations import DbObject, DbQuery, FileOut, data_source, parse_data, parse_out
from sqlnb.models.base import DEFAULT_SOURCE
from sqlnb.models.conformal import with_set_format
from sqlnb.models.naive_bayes import eskdb, skdb
from sqlnb.models.explain import check_explain, reason_columns
from sqlnb.models.finish import generated_columns
from sqlnb.models.naive_bayes.fit import plan_features
from sqlnb.source import QUERY_START, Query, Source, Table, parse_query, read_with, resolve
from sqlnb.workflows import export, plots
from sqlnb.workflows.conformal import coverage, coverage_lines
from sqlnb.workflows.curves import curve_points, scored_once
from sqlnb.workflows.checks import unseen_categories, unseen_counts
from sqlnb.workflows.evaluate import LABELS, evaluate as evaluate_model, text_report
from sqlnb.workflows.generative import novelty_query

#: ``--explain K`` of ``score`` and ``sql`` (sqlnb.models.explain).
explain_option = click.option(
    "--explain", type=int, metavar="K",
    help="Add the K features that most moved each row's decision: reason_1..reason_K (names) and "
         "reason_1_weight.. (their contributions, in nats, to the log-odds of the prediction against the "
         "runner-up class; under a decision rule, of the rule's prediction). Naive Bayes, LDA and logistic "
         "regression.")


@click.command()
@click.argument("data")
@model_option()
@out_option(required=False)
@click.option("--out-table", metavar="NAME",
              help="With --engine postgres|spark: create table NAME there instead of --out (all or nothing).")
@keep_option("Input columns to keep (default: all; '' for none).")
@click.option("--key", metavar="COL",
              help="A column carried into every output row and ordered by (engines such as PostgreSQL "
                   "and Spark keep no row order; DuckDB keeps the input's without it).")
@no_proba_option
@outputs_option
@click.option("--flag-novel", is_flag=True,
              help="Add log_evidence and a BOOLEAN novel column (below the threshold of 'sqlnb novelty').")
@set_format_option
@override_options
@explain_option
@source_options
@replace_option
@click.pass_obj
def score(settings: Settings, data, model, out, out_table, keep, key, no_proba, outputs, flag_novel, set_format, costs,
          threshold, reject, explain, reading, replace):
    """Score DATA with MODEL and write the rows to OUT (default: CSV on stdout).

    Each output row holds the kept input columns, one proba_<class> column per class
    and the prediction (--outputs chooses among proba, prediction, jll_<class>,
    log_proba_<class> and log_evidence; they come out in that order: jll, log_evidence,
    log_proba, proba, prediction); under a decision rule (sqlnb decide, or --costs,
    --threshold, --reject for this call) the rule's prediction, expected_cost (and
    rejected); with conformal sets (sqlnb conformal) prediction_set and set_size
    (--set-format flags: in_set_<class> per class instead of the list). One row
    comes out per input row, in the input's order (DuckDB),
    or ordered by --key COL (any engine); a categorical value is read with the type the
    model was fitted with, and a column whose values the model mostly never saw is
    named on stderr. The output appears only when complete: files are written next
    to the target and moved over it, tables are created in a transaction. With
    --engine postgres|spark, DATA is scored on the engine and the rows written to OUT.

    \b
    Example:
      sqlnb score test.parquet --model models.duckdb:churn --out scored.parquet
      sqlnb score db.duckdb:customers --model db.duckdb:churn --keep id --out db.duckdb:scores --replace
      sqlnb score new.csv --model models.duckdb:churn --no-proba | head
      sqlnb score new.csv --model models.duckdb:churn --outputs jll,log_evidence,prediction --out - | head
      sqlnb score new.parquet --model models.duckdb:churn --flag-novel --out flagged.parquet
      sqlnb score new.parquet --model models.duckdb:churn --explain 3 --out explained.parquet
      sqlnb --engine postgres --dsn 'dbname=lake' score customers --model churn --out-table scores
      sqlnb score test.parquet --model models.duckdb:churn --costs costs.csv --reject 0.3 --out -
    """
    if out is not None and out_table is not None:
        raise SqlnbError("give one of --out OUT and --out-table NAME (a table on --engine postgres|spark), not both")
    if out_table is None and out is None:
        out = "-"  # CSV on stdout, as --out - (``sqlnb --help``: results go to stdout)
    if out_table is not None and not settings.remote:
        raise SqlnbError("--out-table writes a table on --engine postgres or spark; "
                         "with DuckDB use --out DB.duckdb:TABLE")
    target = parse_out(out) if out is not None else None
    if settings.engine == "spark" and isinstance(target, FileOut):
        engine_output.check_spark_target(target, replace)  # before Spark starts
    spec = data_spec(settings, data, reading)
    keep_cols = keep_columns(keep)
    outputs = score_outputs(no_proba, outputs)
    m = with_set_format(use_rule(load(settings, model), costs, threshold, reject), set_format)
    if flag_novel and settings.remote:
        raise SqlnbError("--flag-novel scores in DuckDB only; use --engine duckdb")
    if flag_novel and explain is not None:
        raise SqlnbError("--flag-novel and --explain do not go together yet; score twice")
    if explain is not None:
        check_explain(m, explain)
    if out_table is not None:
        engine = settings.warehouse()
        scoring = m.scoring_query(engine.resolve(spec), outputs, keep_cols, dialect=engine.dialect, key=key,
                                  explain=explain)
        engine_output.write_table(engine, out_table, scoring, replace)
        settings.summary(f"scored into table {out_table!r} on {settings.engine}")
        return
    if settings.remote:
        engine = settings.warehouse()
        result = m.score(spec, con=engine, outputs=outputs, keep=keep_cols, key=key, explain=explain)
        if engine.dialect == "spark" and isinstance(target, FileOut):
            # Written by the executors; no scored row passes through this process.
            engine_output.write_spark_files(engine, result, target, replace)
            settings.summary(f"scored into {out} on spark")
            return
        done = write_out(settings, out, replace, lambda con, own_db: engine_output.rows_query(result, con))
    else:
        def query(con, own_db):
            source = data_source(con, spec, own_db, types=m.read_types())
            if flag_novel:
                if key is not None:
                    raise SqlnbError("--flag-novel keeps the input's order in DuckDB; leave out --key")
                scoring = novelty_query(m, source, None, outputs, keep_cols)
            else:
                scoring = m.scoring_query(source, outputs, keep_cols, key=key, explain=explain)
            warn_unseen(m, source, con)  # once the query is built: a source it refuses gets one Error line only
            return scoring
        done = write_out(settings, out, replace, query)
    settings.summary(f"scored {done}")


#: ``--labels`` of ``evaluate`` and ``report``: which labels the precision/recall/F1 averages are over.
labels_option = click.option(
    "--labels", type=click.Choice(LABELS), default="present", show_default=True,
    help="The labels the macro/weighted/micro precision, recall and F1 average over: those in the rows' labels or "
         "predictions (scikit-learn's default), or every class of the model (scikit-learn's labels=classes).")


def measure(settings: Settings, m, spec, label: str | None, curves: bool, labels: str = "present") -> tuple:
    """Evaluate ``m`` on DATA ``spec`` in DuckDB or on the engine: ``(evaluation, unseen
    category counts, curve points or None, the data's description)``. With ``curves``, a
    second statement aggregates the ROC and precision-recall points and the reliability
    table (:func:`~sqlnb.workflows.curves.curve_points`)."""
    # One statement reads the rows: at a terminal, one line says what the one progress bar
    # below it (DuckDB's, shown for queries past 2 s) is doing.
    doing = "evaluating {}: scoring each row and computing every figure in one pass"
    if settings.remote:
        engine = settings.warehouse()
        source = engine.resolve(read_with(spec, m.read_types()))
        settings.summary(doing.format(source.description))
        ev = evaluate_model(m, source, engine, label, labels)
        unseen = warn_unseen(m, source, engine)  # after: rows evaluate refuses (no label) get one Error line only
        points = curve_points(m, source, engine, label, max_points=plots.CURVE_POINTS) if curves else None
    else:
        with settings.working(), settings.connect() as con:
            # The curves keep a group per class and distinct score (10M rows held 5.4 GB
            # without a limit; under 1 GB it spills); the figures alone stream the rows and
            # rank the scores in numpy, under a far smaller limit (benchmarks/README.md).
            small = not curves and bound_evaluate(settings, con)
            if not small:
                bound_memory(settings, con)
            source = data_source(con, spec, types=m.read_types())
            settings.summary(doing.format(source.description))
            # With the curves, the rows are scored once into a temporary table that both
            # statements read (a big model's SELECT planned and run once).
            with scored_once(m, source, con, label) if curves else nullcontext() as scored:
                try:
                    ev = evaluate_model(m, source, con, label, labels, scored=scored)
                except duckdb.OutOfMemoryException:
                    if not small:
                        raise
                    ev = None
                if ev is None:
                    # Parquet pages or rows too large for the small limit (what DuckDB's reader
                    # holds per thread): the same statement, so the same figures, under the 1 GB
                    # limit on one thread (run outside the except block, whose traceback would
                    # keep the first run's reader alive).
                    bound_evaluate_again(settings, con)
                    ev = evaluate_model(m, source, con, label, labels)
                # Named once the figures are computed, before any is printed: rows evaluate
                # refuses (no label column, ...) get their one Error line only.
                unseen = warn_unseen(m, source, con)
                points = curve_points(m, source, con, label, max_points=plots.CURVE_POINTS,
                                      scored=scored) if curves else None
    return ev, unseen, points, source.description


def plot_targets(directory: str, replace: bool) -> dict[str, str]:
    """The SVG files ``evaluate --plots DIR`` writes, checked before any row is read: DIR
    is a directory or will be created (when the plots are written, after the figures), and an
    existing plot is overwritten only with --replace."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise SqlnbError(f"--plots {directory!r} is a file; give a directory for the SVG files")
    files = plots.plot_files(directory)
    there = [f for f in files.values() if os.path.exists(f)]
    if there and not replace:
        raise SqlnbError(f"{there[0]!r} exists; add --replace to overwrite the plots in {directory!r}")
    return files


@click.command()
@click.argument("data")
@model_option()
@label_option("The label column in DATA (default: the model's).", required=False)
@format_option
@click.option("--min-accuracy", type=click.FloatRange(0, 1), metavar="A",
              help=f"Exit with code {EXIT_FAIL} when accuracy is below A (for CI).")
@click.option("--plots", "plots_dir", metavar="DIR",
              help="Also write confusion_matrix.svg, reliability.svg, roc.svg and precision_recall.svg "
                   "into DIR (created when missing).")
@replace_option
@labels_option
@click.option("--by", metavar="COL", help="With conformal sets: also their coverage and mean size per value of "
                                          "column COL of DATA.")
@override_options
@source_options
@click.pass_obj
def evaluate(settings: Settings, data, model, label, fmt, min_accuracy, plots_dir, replace, labels, by, costs,
             threshold, reject, reading):
    """Measure MODEL on labelled DATA: accuracy, log loss, Brier, per-class
    precision/recall/F1, confusion matrix, and ROC AUC for two classes.

    Everything is computed in SQL over the scoring query, in one read of the rows;
    only the figures come back. Rows without a label are counted and skipped; rows with
    zero likelihood under every class are reported. Under a decision rule, the
    predictions are the rule's, and the report adds the expected cost of the decisions
    (the mean L(label, prediction) over the accepted rows whose label is a class) and,
    with a reject option, the rejected rows and the accuracy on the accepted ones (rows
    with probabilities but no prediction count as errors in accuracy). Macro and weighted
    averages are over the labels present in the rows or their predictions, as
    scikit-learn's (--labels model: over every class of the model). With --engine
    postgres|spark, DATA (a table, view or query there, or files Spark reads) is scored
    and measured on the engine. --plots DIR draws the confusion matrix, the reliability diagram and the
    one-vs-rest ROC and precision-recall curves as SVG files, from figures aggregated in
    SQL (the rows scored once into a temporary table that the figures and the curves read).

    \b
    Example:
      sqlnb evaluate test.parquet --model models.duckdb:churn
      sqlnb evaluate test.parquet --model models.duckdb:churn --plots plots/
      sqlnb evaluate test.parquet --model models.duckdb:churn --by region
      sqlnb evaluate db.duckdb:holdout --model db.duckdb:churn --format json --min-accuracy 0.8
      sqlnb --engine spark evaluate s3a://lake/holdout/ --model churn --min-accuracy 0.8
    """
    spec = data_spec(settings, data, reading)
    files = plot_targets(plots_dir, replace) if plots_dir is not None else None
    m = use_rule(load(settings, model), costs, threshold, reject)
    if by is not None and m.conformal is None:
        raise SqlnbError(f"--by {by} reports the coverage of conformal sets per value of the column, and the model has "
                         "none; fit them with sqlnb conformal, or leave --by out")
    ev, unseen, points, _ = measure(settings, m, spec, label, curves=files is not None, labels=labels)
    if files:
        os.makedirs(plots_dir, exist_ok=True)
        for stem, svg in plots.evaluation_plots(ev, points).items():
            write_text_file(files[stem], svg)
        settings.summary(f"plots in {plots_dir}: {', '.join(os.path.basename(f) for f in files.values())}")
    sets = set_coverage(settings, m, spec, label, by) if m.conformal is not None else None
    if fmt == "json":
        click.echo(dump_json(ev.to_dict() | {"unseen_categories": unseen} | ({"conformal": sets} if sets else {})))
    else:
        click.echo(text_report(ev) + ("\n" + "\n".join(coverage_lines(sets)) if sets else ""))
    settings.summary(f"evaluated {ev.rows:,} rows in {ev.seconds:.2f} s")
    if min_accuracy is not None and (ev.accuracy is None or ev.accuracy < min_accuracy):
        got = "n/a (no labelled rows)" if ev.accuracy is None else f"{ev.accuracy:.4f}"
        click.echo(f"Error: accuracy {got} is below --min-accuracy {min_accuracy}", err=True)
        raise click.exceptions.Exit(EXIT_FAIL)


def set_coverage(settings: Settings, m, spec, label: str | None, by: str | None = None) -> dict:
    """Coverage and size of ``m``'s conformal sets on DATA (a second pass over the rows,
    :func:`sqlnb.workflows.conformal.coverage`), per value of column ``by`` too."""
    if settings.remote:
        return coverage(m, settings.warehouse().resolve(read_with(spec, m.read_types())), settings.warehouse(), label,
                        by)
    with settings.working(), settings.connect() as con:
        return coverage(m, data_source(con, spec, types=m.read_types()), con, label, by)


def warn_unseen(m, source: Source, con) -> list[dict]:
    """Say on stderr, before any row is written, how many values of each categorical
    column the model never saw, with a warning where they are most of them (a leading
    space, another spelling): they score as missing. Returns the counts."""
    counts = unseen_counts(m, source, con)
    for line in unseen_categories(m, source, con, counts=counts):
        click.echo(line, err=True)
    return counts


@click.command("sql")
@click.argument("data", required=False)
@model_option("The model (optional with --fit).", required=False)
@click.option("--dialect", "-d", default="duckdb", show_default=True, metavar="|".join(sql.DIALECTS),
              help="SQL dialect to print.")
@click.option("--source", "-s", "source_text", metavar="TABLE|QUERY",
              help=f"What the SQL reads: one table name or a SELECT (default: DATA, else {DEFAULT_SOURCE!r}).")
@click.option("--key", metavar="COL",
              help="A column of the source carried into the output and ordered by (for engines without a row order).")
@click.option("--fit", "training", is_flag=True, help="Print the training (statistics) SQL instead.")
@click.option("--macro", metavar="NAME", help="Print a DuckDB table macro score_NAME(tbl) instead.")
@outputs_option
@label_option("With --fit and no --model: the label column.", required=False)
@feature_options
@click.option("--pretty/--compact", default=True, help="One clause per line (default) or one line.")
@click.option("--semicolon", is_flag=True,
              help="End the scoring SELECT with ';' (by default it has none, so that it pastes as a subquery, "
                   "a CTE's body or a view's query as printed).")
@set_format_option
@override_options
@explain_option
@source_options
@click.pass_obj
def sql_command(settings: Settings, data, model, dialect, source_text, key, training, macro, outputs, label, kind,
                feature_kind, features, exclude, weight, binarize, pretty, semicolon, set_format, costs, threshold,
                reject, explain, reading):
    """Print the self-contained scoring SELECT of MODEL (or, with --fit, the training SQL).

    Parameters are inlined as DOUBLE literals, so the SELECT runs anywhere the dialect
    does. Its output is the source's columns, proba_<class> per class and prediction
    (or the scores --outputs names, as for sqlnb score). It ends without ';' (--semicolon
    adds one), so it pastes as printed into WITH s AS (...), FROM (...) or CREATE VIEW v AS.
    Give DATA (files or db.duckdb:TABLE) to list the source's columns explicitly;
    without it, columns are passed through with * (the helper columns jll_*,
    max_jll, exp_shifted_*, sum_exp_shifted and log_evidence then stay in the output, and
    under a decision rule expected_cost_*, min_expected_cost or max_proba). The model's
    decision rule (sqlnb decide) is in the SELECT: prediction, expected_cost (and
    rejected). Conformal sets (sqlnb conformal) follow the prediction: prediction_set
    (DuckDB) or in_set_<class> per class (other dialects, or --set-format flags), and
    set_size. --source names what the SQL reads in the target warehouse; a qualified
    name goes in a query: --source 'SELECT * FROM a.b'. Run PostgreSQL's in a session
    with SET jit = off (a note on stderr says so; docs/dialects.md).

    \b
    Example:
      sqlnb sql --model models.duckdb:churn --dialect postgres --source customers
      sqlnb sql test.parquet --model models.duckdb:churn > score.sql
      sqlnb sql --fit train.parquet --label churned --dialect snowflake
      sqlnb sql --model models.duckdb:churn --macro churn > macro.sql
      sqlnb sql --model models.duckdb:churn --dialect postgres --source customers --explain 3
      sqlnb sql --model models.duckdb:churn --outputs log_proba,prediction --source customers
      sqlnb sql customers.duckdb:customers --model models.duckdb:churn --key id --dialect sqlite
    """
    if dialect not in sql.DIALECTS:
        raise SqlnbError(f"unknown dialect {dialect!r}{suggest(dialect, sql.DIALECTS)}; "
                         f"choose one of: {', '.join(sql.DIALECTS)}")
    if model is None and not training:
        raise SqlnbError("give --model MODEL (or --fit with --label to print the training SQL)")
    if explain is not None and (training or macro is not None):
        raise SqlnbError("--explain adds reasons to the scoring SELECT; leave it out with --fit and --macro")
    if outputs and training:
        raise SqlnbError("--outputs chooses the scores of the scoring SELECT; leave it out with --fit")
    if set_format and training:
        raise SqlnbError("--set-format chooses how the scoring SELECT gives conformal sets; leave it out with --fit")
    outputs = score_outputs(False, outputs)
    if macro is not None:
        if model is None or training or data or source_text or key or dialect != "duckdb":
            raise SqlnbError("--macro prints a DuckDB macro of --model only; leave out --fit, DATA, "
                             "--source, --key and --dialect")
        if not macro:
            raise SqlnbError("--macro needs a NAME for the macro score_NAME")
        click.echo(export.duckdb_macro(with_set_format(use_rule(load(settings, model), costs, threshold, reject),
                                                       set_format), macro, outputs, pretty=pretty), nl=False)
        return
    if training and (costs is not None or threshold is not None or reject is not None):
        raise SqlnbError("--costs, --threshold and --reject decide in the scoring SELECT; leave them out with --fit")
    if key is not None and training:
        raise SqlnbError("--key orders the scoring SELECT; leave it out with --fit")
    m = load(settings, model) if model else None
    if m is not None:
        m = with_set_format(use_rule(m, costs, threshold, reject), set_format)
    node = _source_node(source_text, dialect) if source_text else None
    with settings.connect() as con:
        spec = parse_data(data, reading) if data else None
        data_is_table = isinstance(spec, DbObject)
        data_is_db_query = isinstance(spec, DbQuery)
        # DATA files are read as `score` reads them (the model's types), so that the SQL
        # scores what `score` would: a categorical column fitted as numbers read as text.
        types = m.read_types() if m is not None and not training else None
        source = data_source(con, spec, types=types) if spec is not None else None
        if source is not None and (node is not None or data_is_table or data_is_db_query):
            # What the SQL reads in the target: --source, or DATA's table by its own name, or
            # DATA's query as written (not through the read-only attachment used here to
            # learn the columns).
            own = sql.table(spec.name) if data_is_table else (
                sqlglot.exp.Subquery(this=parse_query(spec.text)) if data_is_db_query else None)
            source = dataclasses.replace(source, expr=node if node is not None else own)
        if training:
            text = _training_sql(m, source, node, label, dialect, pretty,
                                 feature_plan_args(kind, feature_kind, features, exclude, weight, binarize), con)
        else:
            if source is None and node is not None and not isinstance(node, sqlglot.exp.Subquery):
                _refuse_clash_in_model_db(settings, model, source_text, m, outputs, explain)
            target = source if source is not None else (
                Query(source_text) if node is not None and isinstance(node, sqlglot.exp.Subquery)
                else Table(source_text or DEFAULT_SOURCE))
            # No ';' unless asked: the SELECT is pasted into CTEs, subqueries and views.
            text = m.to_sql(dialect, source=target, con=con, outputs=outputs, pretty=pretty, key=key,
                            explain=explain) + (";" if semicolon else "")
            if dialect == "postgres":
                click.echo(POSTGRES_JIT_NOTE, err=True)
    click.echo(text)


#: Said on stderr with every PostgreSQL scoring SELECT: the setting cannot be inside it (it
#: stays one SELECT, pasteable into a CTE), and a default server compiles it with JIT once
#: the planner's estimate passes jit_above_cost, which on large tables can take minutes
#: and gigabytes (docs/dialects.md, "PostgreSQL's JIT").
POSTGRES_JIT_NOTE = ("note: run this SELECT in a session with SET jit = off: PostgreSQL's JIT (on by default) "
                     "can take minutes compiling it on large tables (docs/dialects.md)")


def _refuse_clash_in_model_db(settings: Settings, model: str, name: str, m, outputs,
                              explain: int | None = None) -> None:
    """``--source NAME`` without DATA: the SELECT passes the source through with ``*``, so
    a source column named like a generated one would come out twice. When the model's
    database holds a table or view NAME, check its columns (the rule: an explicit error
    whenever the columns are known; the generated names are in the docs otherwise)."""
    loc = model_location(settings, model)
    if isinstance(loc, str) or not os.path.exists(loc.db):
        return
    with settings.connect(loc.db, read_only=True) as con:
        try:
            columns = resolve(Table(name), con).columns
        except SqlnbError:
            return  # not a table here: its columns are unknown
    generated = {c.lower() for c in generated_columns(m.classes, outputs, decision=m.decision)
                 + (reason_columns(explain) if explain else [])}
    clash = [c for c in columns if c.lower() in generated]
    if clash:
        raise SqlnbError(f"--source {name!r} (a table in {loc.db!r}) already has a column named {clash[0]!r}, "
                         "which the scoring SELECT adds; give --source a query that leaves it out or renames it")


def _source_node(text: str, dialect: str) -> sqlglot.exp.Expression:
    """--source: a query when it reads like one (parsed in the target dialect), else one
    table name (never parsed)."""
    if QUERY_START.match(text):
        return sqlglot.exp.Subquery(this=parse_query(text, dialect))
    return sql.table(text)


def _training_sql(m, source: Source | None, node, label, dialect, pretty, plan: dict, con) -> str:
    """The statistics query (and, where categorical counts need it, the GROUPING SETS
    counts query, and for a tree-augmented model the pair counts) that ``sqlnb fit``
    runs, for the model's plan or for the options. What no static statement holds (a
    weighted model's Gaussian second pass, bin cut points, token counts) is said on
    stderr, one ``note:`` line each (:func:`sqlnb.workflows.export.fit_notes`)."""
    pairs: list[str] = []
    if m is not None:
        if m.kind != "naive_bayes":
            raise SqlnbError(f"--fit prints naive Bayes training SQL; this model is {m.kind!r}, which sqlnb fits "
                             "itself (sqlnb fit --kind " + m.kind + "); export its scoring SELECT with sqlnb sql")
        label, weight, feats = m.label, m.weight, m.features
        if m.stats.pairs is not None:  # tree-augmented: the pair scan is part of the fit
            pairs = list(m.stats.pairs.features)
        if source is None:
            columns = {f.name: f.sql_type for f in feats} | {label: m.label_type}
            source = Source(node if node is not None else sql.table(DEFAULT_SOURCE), columns, "the source")
        else:
            source.require([label, *[f.name for f in feats]] + ([weight] if weight else []), "model column")
    else:
        if not label:
            raise SqlnbError("--fit without --model needs --label COL (and DATA or a --source DuckDB can read)")
        if source is None:
            if node is None or not isinstance(node, sqlglot.exp.Subquery):
                raise SqlnbError("--fit needs the source's columns: give DATA (files or DB.duckdb:TABLE) "
                                 "or a --source query DuckDB can read")
            source = dataclasses.replace(resolve(Query(sql.render(node.this)), con), expr=node)
        weight = plan["weight"]
        feats = plan_features(source, label, **plan)
    text = "\n\n".join(sql.render(s, dialect, pretty=pretty) + ";"
                       for s in export.fit_queries(source, label, feats, dialect, weight, pairs))
    for note in export.fit_notes(feats, weight):
        click.echo(note, err=True)
    structure = m.hyper.structure if m is not None and m.kind == "naive_bayes" else None
    if structure == "kdb:2" and getattr(m.stats.pairs, "joints", None):  # sqlnb.models.naive_bayes.kdb
        click.echo("note: a kdb:2 model's counts of each feature with its two parents come from one more scan over "
                   "the triples the pair counts' structure chooses, which this SQL leaves out (sqlnb fit runs it)",
                   err=True)
    elif structure and skdb.deep(structure):  # kdb:3 to kdb:5, skdb (sqlnb.models.naive_bayes.skdb)
        click.echo(f"note: the {structure} model's counts of each feature with each prefix of its parents come from "
                   "one more scan over the feature sets the pair counts' structure chooses"
                   + (", and its training rows as patterns from another" if skdb.selective(structure) else "")
                   + ", which this SQL leaves out (sqlnb fit runs them)", err=True)
    elif structure and eskdb.ensemble(structure):  # sqlnb.models.naive_bayes.eskdb
        click.echo(f"note: the {structure} model's members count their parents from its training rows as patterns, "
                   "which come from one more scan that this SQL leaves out (sqlnb fit runs it)", err=True)
    return text
