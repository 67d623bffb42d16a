"""``sqlnb conformal``: fit conformal prediction sets of a saved model on held-out labelled
rows and store them with the model (:mod:`sqlnb.models.conformal`,
:mod:`sqlnb.workflows.conformal`)."""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.generative import _held_out_or_clear
from sqlnb.cli.io import dump_json, model_str
from sqlnb.cli.options import format_option, model_option, source_options
from sqlnb.models.conformal import METHODS, MISSING_CLASS, with_sets


@click.command()
@click.argument("data", required=False)
@model_option()
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.1, show_default=True,
              metavar="A", help="Miscoverage: each set holds the true class for at least 1 - A of the rows.")
@click.option("--method", type=click.Choice(METHODS), default="lac", show_default=True,
              help="lac (classes with 1 - p <= q), aps (the most probable classes up to cumulative "
                   "probability q), raps (aps with a penalty for each class beyond the k_reg most probable: "
                   "smaller sets) or mondrian (lac with one threshold per class, or per value of --by: coverage "
                   "per class or group).")
@click.option("--randomized", is_flag=True, help="With --method aps: randomised APS (exact coverage, may give "
                                                 "empty sets), from --seed.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of --randomized, and of raps's split of DATA into tuning rows.")
@click.option("--lambda", "lam", type=click.FloatRange(0), metavar="F",
              help="With --method raps: the penalty per class beyond --k-reg [default: chosen among 0.001, 0.01, "
                   "0.1, 0.2, 0.5 for the smallest sets on a fifth of DATA, the threshold fitted on the rest].")
@click.option("--k-reg", "k_reg", type=click.IntRange(0), metavar="N",
              help="With --method raps: the number of most probable classes free of the penalty [default: the "
                   "1 - A quantile of the true class's rank on a fifth of DATA].")
@click.option("--by", metavar="COL",
              help="With --method mondrian: one threshold per value of column COL (text, integer or boolean) "
                   "instead of per class; a value of too few rows, NULL and a value unseen in DATA take the "
                   "threshold of all rows. Scored rows need COL.")
@click.option("--missing-class", type=click.Choice(MISSING_CLASS), metavar="|".join(MISSING_CLASS),
              help="With --method mondrian: what a class with too few held-out rows for a threshold of its own "
                   "(fewer than 1/A - 1; none, most often) gets: pooled, the threshold of all held-out rows "
                   "(lac's; the default: sets stay as small as lac's), every (in every set: the coverage holds, each "
                   "set has one class more), exclude (in no set: that class's rows are never covered), or error "
                   "(refuse, in one line). Stored with the sets.")
@click.option("--label", "-y", metavar="COL", help="DATA's label column [default: the model's label].")
@click.option("--clear", is_flag=True, help="Remove the model's sets instead (no DATA).")
@format_option
@source_options
@click.pass_obj
def conformal(settings: Settings, data, model, alpha, method, randomized, seed, lam, k_reg, by, missing_class, label,
              clear, fmt, reading):
    """Fit conformal prediction sets of MODEL on DATA, labelled rows the model (and its
    calibrator) was not fitted on; store them with the model.

    Every later score, sql and evaluate adds the sets after the prediction: prediction_set
    (a list of classes) and set_size in DuckDB, in_set_<class> (one BOOLEAN per class)
    and set_size in other dialects; evaluate reports their coverage. Refit them after
    sqlnb calibrate or update (both drop them, with a note). See docs/conformal.md.

    \b
    Example:
      sqlnb conformal holdout.parquet --model models.duckdb:churn --alpha 0.1
      sqlnb conformal holdout.parquet --model models.duckdb:churn --method mondrian
      sqlnb conformal holdout.parquet --model models.duckdb:churn --method mondrian --missing-class error
      sqlnb conformal holdout.parquet --model models.duckdb:churn --method raps
      sqlnb conformal holdout.parquet --model models.duckdb:churn --method raps --lambda 0.01 --k-reg 2
      sqlnb conformal holdout.parquet --model models.duckdb:churn --method mondrian --by region
      sqlnb conformal --model models.duckdb:churn --clear
    """
    def fit_sets(m, source, con):
        from sqlnb.workflows.conformal import conformal

        return conformal(m, source, alpha, method, randomized=randomized, seed=seed, label=label, con=con,
                         missing_class=missing_class, lam=lam, k_reg=k_reg, by=by)

    done = _held_out_or_clear(settings, "conformal", data, model, reading, clear, "the sets", "the conformal sets",
                              "fit the sets on", with_sets, fit_sets)
    if done is None:
        return
    m, loc = done
    sets = m.conformal
    click.echo(dump_json(sets.describe(m.classes)) if fmt == "json"
               else f"conformal {model_str(loc)}: {sets.summary(m.classes)}")
