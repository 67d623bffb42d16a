"""Naive Bayes as a generative model: ``sqlnb update`` (add new rows to a model),
``sqlnb sample`` (draw synthetic rows), ``sqlnb novelty`` (calibrate the threshold of
``score --flag-novel``) and ``sqlnb fit-em`` (semi-supervised fitting by EM).
"""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.io import arrow_rows, check_new_model, dump_json, load, model_str, modify, save, write_out
from sqlnb.cli.options import (alpha_option, bins_option, source_options, features_options, format_option, kind_option,
                               label_option, model_option, out_option, parse_bins, replace_option, seed_option, split_list)
from sqlnb.errors import SqlnbError, suggest
from sqlnb.io.locations import Reading, data_source, parse_data, parse_model, parse_out
from sqlnb.workflows.generative import fit_em, novelty_threshold, sample as draw_sample, update as update_model


def _refit(settings: Settings, command: str, data: str, model: str, reading: Reading, refit) -> tuple:
    """Load MODEL, replace it by ``refit(model, source, con)`` over DATA, save it under
    the same name; returns (the new model, its location)."""
    settings.require_duckdb(command)
    parse_model(model)
    spec = parse_data(data, reading)

    def change(m):
        with settings.working(), settings.connect() as con:
            return refit(m, data_source(con, spec, types=m.column_types()), con)
    return modify(settings, model, change)  # read, refit, save only over the model read


def _held_out_or_clear(settings: Settings, command: str, data: str | None, model: str, reading: Reading, clear: bool,
                       what: str, removed: str, purpose: str, attach, refit) -> tuple | None:
    """What ``calibrate`` and ``conformal`` do with a held-out part of MODEL (its calibrator,
    its conformal sets): with --clear, ``attach(model, None)`` saved over MODEL, reading no
    DATA (None is returned); else :func:`_refit` with ``refit`` on DATA. ``what`` and
    ``removed`` name the part in the --clear error and summary, ``purpose`` says what DATA is
    for when it is missing."""
    if clear:
        if data is not None:
            raise SqlnbError(f"--clear removes {what} and reads no DATA; give only --model")
        settings.require_duckdb(command)
        modify(settings, model, lambda m: attach(m, None))
        settings.summary(f"removed {removed} of {model}")
        return None
    if data is None:
        raise SqlnbError(f"give DATA, the held-out labelled rows to {purpose} (or --clear)")
    return _refit(settings, command, data, model, reading, refit)


@click.command()
@click.argument("data")
@model_option()
@click.option("--decay", type=click.FloatRange(0, 1, min_open=True), metavar="D",
              help="Down-weight the model's past rows by D in (0, 1] first.")
@source_options
@click.pass_obj
def update(settings: Settings, data, model, decay, reading):
    """Update naive Bayes MODEL with the new rows of DATA (exactly the refit on all rows).

    The model is replaced under the same name in one transaction: a failed update leaves
    it as it was.

    \b
    Example:
      sqlnb update lake/2026-06/*.parquet --model models.duckdb:churn
      sqlnb update today.csv --model models.duckdb:churn --decay 0.9
    """
    m, loc = _refit(settings, "update", data, model, reading,
                    lambda m, source, con: update_model(m, source, con=con, decay=decay))
    settings.summary(f"updated {model_str(loc)}: {m.stats.n_rows:,} rows in all")


@click.command()
@model_option()
@click.option("-n", "--rows", "n", type=click.IntRange(min=1), required=True, metavar="N", help="Rows to draw.")
@click.option("--class", "classes", multiple=True, metavar="C,...", help="Draw only these classes (repeatable).")
@seed_option("Random seed (same seed, same rows).")
@out_option()
@replace_option
@click.pass_obj
def sample(settings: Settings, model, n, classes, seed, out, replace):
    """Draw N synthetic rows from naive Bayes MODEL's joint distribution p(x, class).

    Classes follow the model's prior (restricted to --class when given); features are
    drawn given the class. Written like score's OUT.

    \b
    Example:
      sqlnb sample --model models.duckdb:churn -n 1000 --seed 1 --out synthetic.parquet
      sqlnb sample --model models.duckdb:churn -n 5 --class yes --out -
    """
    parse_out(out)
    m = load(settings, model)
    chosen = split_list(classes)
    if chosen is not None:
        by_text = {str(c): c for c in m.classes}
        unknown = [c for c in chosen if c not in by_text]
        if unknown:
            raise SqlnbError(f"--class {unknown[0]!r} is not a class of the model{suggest(unknown[0], list(by_text))}; "
                             f"classes: {', '.join(by_text)}")
        chosen = [by_text[c] for c in chosen]
    rows = draw_sample(m, n, classes=chosen, seed=seed)
    settings.summary(f"sampled {write_out(settings, out, replace, arrow_rows(rows))}")


@click.command()
@click.argument("data")
@model_option()
@click.option("--quantile", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.01,
              show_default=True, metavar="Q", help="Share of DATA's rows to call novel.")
@format_option
@source_options
@click.pass_obj
def novelty(settings: Settings, data, model, quantile, fmt, reading):
    """Calibrate MODEL's novelty threshold: the Q quantile of ln p(x) over DATA (usually
    the training rows), stored in the model for 'sqlnb score --flag-novel'.

    \b
    Example:
      sqlnb novelty train.parquet --model models.duckdb:churn --quantile 0.01
      sqlnb score new.parquet --model models.duckdb:churn --flag-novel --out flagged.parquet
    """
    m, _ = _refit(settings, "novelty", data, model, reading,
                  lambda m, source, con: novelty_threshold(m, source, quantile, con=con))
    found = m.report["novelty"]
    click.echo(dump_json(found) if fmt == "json" else
               f"novelty threshold {found['threshold']:.6g} (log evidence quantile {found['quantile']} "
               f"over {found['rows']:,} rows)")


@click.command("fit-em")
@click.argument("labelled", metavar="DATA")
@click.option("--unlabelled", metavar="DATA2", help="Unlabelled rows (default: DATA's rows with a NULL label).")
@label_option("The label column of DATA.")
@model_option()
@kind_option("Naive Bayes family of every feature.")
@features_options("Feature columns.")
@bins_option
@alpha_option("Pseudo-count of discrete features (default 1).")
@click.option("--max-iter", type=click.IntRange(min=0), default=50, show_default=True, help="Most EM iterations.")
@click.option("--tol", type=click.FloatRange(min=0), default=1e-6, show_default=True,
              help="Stop when the log-likelihood per row changes by at most this.")
@click.option("--unlabelled-weight", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Weight of each unlabelled row.")
@source_options
@replace_option
@click.pass_obj
def fit_em_command(settings: Settings, labelled, unlabelled, label, model, kind, features, exclude, bins, alpha,
                   max_iter, tol, unlabelled_weight, reading, replace):
    """Fit naive Bayes on labelled and unlabelled rows by EM (semi-supervised).

    \b
    Example:
      sqlnb fit-em labelled.parquet --unlabelled pool.parquet --label topic --model models.duckdb:em
      sqlnb fit-em mixed.parquet --label topic --model models.duckdb:em --max-iter 20
      sqlnb fit-em mixed.parquet --label topic --bins mdl --model models.duckdb:em_mdl

    Binned columns (--bins, --kind binned) are cut at the labelled rows, as 'sqlnb fit'
    cuts them; EM then re-weights the unlabelled rows' bins.
    """
    settings.require_duckdb("fit-em")
    loc = parse_model(model)
    spec, spec2 = parse_data(labelled, reading), parse_data(unlabelled, reading) if unlabelled else None
    check_new_model(settings, loc, replace)
    hyper = {"alpha": alpha} if alpha is not None else {}
    with settings.working(), settings.connect() as con:
        m = fit_em(data_source(con, spec, keep_text=(label,)), data_source(con, spec2) if spec2 else None,
                   label=label, con=con,
                   max_iter=max_iter, tol=tol, unlabelled_weight=unlabelled_weight, kind=kind,
                   features=split_list(features), exclude=split_list(exclude), bins=parse_bins(bins), **hyper)
    save(settings, m, loc, replace)
    settings.summary(f"fitted {model_str(loc)} by EM")
