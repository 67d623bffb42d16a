"""``sqlnb fit``: fit naive Bayes (or LDA, QDA, logistic regression) on DATA in one scan
and save it as MODEL, in DuckDB or on the ``--engine`` warehouse.
"""

from __future__ import annotations

import time

import click

from sqlnb import api
from sqlnb.cli.app import Settings
from sqlnb.cli.io import check_new_model, model_str, save
from sqlnb.cli.options import (FitOptions, data_spec, fit_options, label_option, model_location, model_option,
                               replace_option, source_options)
from sqlnb.errors import ScreeningWarning, SqlnbError, warn
from sqlnb.io.locations import data_source


@click.command()
@click.argument("data")
@label_option("The label column (rows with a NULL label are left out, counted on stderr).")
@model_option()
@fit_options
@source_options
@replace_option
@click.option("--auto", is_flag=True,
              help="Choose the model by cross-validation on DATA: naive Bayes, learnt weights, TAN, KDB(1), AODE, "
                   "KDB(2) and their average, each with alpha 0.5, 1 and 2, numeric columns in MDL bins; prints "
                   "what it tried and saves the best (see docs/weighted.md).")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="--auto: start no new stage of candidates after SECONDS (default 300).")
@click.pass_obj
def fit(settings: Settings, data, label, model, fitting: FitOptions, reading, replace, auto, budget):
    """Fit a model on DATA and save it as MODEL: naive Bayes (--kind auto or a family),
    or --kind lda, qda or logistic (numeric features).

    One scan of DATA computes every statistic; the model (a few small tables) is saved
    in one transaction, so a failed fit leaves an existing model untouched. Text
    columns given --feature-kind COL=multinomial are token bags (see the text options).
    Without --features, identifiers (integers with 90% distinct values, columns named
    like an ID with 50%, text categories with more distinct values than half their
    rows) and constants whose removal changes no probability are left out, each named
    on stderr with how to keep it (--keep-columns); constant count (multinomial,
    complement, Bernoulli) columns stay. A Gaussian column whose variance lifts the
    variance floor above other columns' variances is named with the fix.

    \b
    Example:
      sqlnb fit lake/2026/*.parquet --label churned --model models.duckdb:churn
      sqlnb fit adult.csv --null-string '?' --label income --exclude fnlwgt \\
          --feature-kind education-num=categorical --model models.duckdb:adult --replace
      sqlnb fit adult.csv --null-string '?' --label income --structure tan --model models.duckdb:adult_tan
      sqlnb fit train.parquet --label y --kind lda --shrinkage 0.1 --model models.duckdb:lda
      sqlnb fit adult.csv --null-string '?' --label income --bins mdl --model models.duckdb:adult_mdl
      sqlnb fit mails.parquet --label spam --feature-kind body=multinomial --stop-words @stop.txt \\
          --min-df 2 --model models.duckdb:spam
    """
    target = model_location(settings, model)
    spec = data_spec(settings, data, reading)
    model_kind, params = fitting.model, fitting.params
    if model_kind not in ("naive_bayes", "weighted") and settings.remote:
        raise SqlnbError(f"--kind {model_kind} is fitted in DuckDB only; use --engine duckdb")
    check_new_model(settings, target, replace)
    start = time.perf_counter()
    if budget is not None and not auto:
        raise SqlnbError("--budget is the time budget of --auto; add --auto or leave out --budget")
    if auto:
        m = _auto(settings, spec, label, fitting, budget)
    elif settings.remote:  # columns screening leaves out are noted on stderr (sqlnb.cli.app)
        m = api.fit(spec, label, con=settings.warehouse(), model=model_kind, **params)
    else:
        with settings.working(), settings.connect() as con:
            m = api.fit(data_source(con, spec, keep_text=(label,)), label, con=con, model=model_kind, **params)
    if hasattr(m, "log_parameters"):
        # Derive the log-parameters now: a setting that cannot be applied to these
        # statistics (e.g. MAP with alpha < 1 on a zero count) fails before saving.
        m.log_parameters()
    save(settings, m, target, replace)
    skipped = m.report.get("null_label_rows") or 0
    if skipped:  # counted by the training scan itself; printed with the other notes (sqlnb.cli.app)
        warn(f"note: {skipped:,} row{'s' * (skipped > 1)} with a NULL label ({label!r}) "
                      f"{'were' if skipped > 1 else 'was'} left out of the fit", ScreeningWarning)
    settings.summary(f"fitted {model_str(target)}: {m.report.get('rows', 0):,} rows"
                     + (f" ({skipped:,} with a NULL label skipped)" if skipped else "")
                     + f", {len(m.classes)} classes, {len(m.features)} features, {time.perf_counter() - start:.2f} s"
                     + _choice(m))


def _choice(m) -> str:
    """skdb's leave-one-out choice, or the range of an eskdb's members' choices, for the fit
    summary (the table, and each member: sqlnb show)."""
    c = m.skdb_summary() if hasattr(m, "skdb_summary") else {}
    if c:
        return (f"; skdb chose k = {c['k']} and the first {c['s']} of {len(c['order'])} features by leave-one-out "
                f"(RMSE {c['rmse'][c['k']][c['s'] - 1]:.4f}; sqlnb show has the table)")
    members = (m.eskdb_summary() if hasattr(m, "eskdb_summary") else {}).get("members")
    if not members:
        return ""
    ks, ss = sorted({e["k"] for e in members}), sorted({e["s"] for e in members})
    return (f"; eskdb's {len(members)} members chose k = {_span(ks)} and s = {_span(ss)} of "
            f"{len(members[0]['order'])} features by leave-one-out (sqlnb show has each member)")


def _span(values: list) -> str:
    return str(values[0]) if len(values) == 1 else f"{values[0]} to {values[-1]}"


def _auto(settings: Settings, spec, label: str, fitting: FitOptions, budget: float | None):
    """``--auto``: the candidates of :mod:`sqlnb.workflows.auto`, their table on stdout, the
    winner returned. Only the column options (--features, --exclude, --keep-columns) apply:
    the search chooses the rest."""
    from sqlnb.workflows.auto import BUDGET, auto_fit  # here: a plain fit process imports no cross-validation
    given = {k for k, v in fitting.params.items() if k not in ("features", "exclude", "keep_columns", "text")
             and v not in (None, {}, (), "auto", 0.0)}
    if fitting.model != "naive_bayes" or given:
        what = f"--kind {fitting.model}" if fitting.model != "naive_bayes" else ", ".join(sorted(given))
        raise SqlnbError(f"--auto chooses the model kind, structure, smoothing and bins itself; leave out {what}")
    if settings.remote:
        raise SqlnbError("--auto runs on DuckDB; use --engine duckdb")
    columns = {k: fitting.params.get(k) for k in ("features", "exclude", "keep_columns")}
    with settings.working(), settings.connect() as con:
        result = auto_fit(data_source(con, spec, keep_text=(label,)), label, con=con,
                          budget=BUDGET if budget is None else budget, **columns)
    click.echo(result.table())
    return result.model
