"""``sqlnb calibrate``: fit a calibrator of a saved model's probabilities on held-out
labelled rows and store it with the model (:mod:`sqlnb.models.calibration`)."""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.generative import _held_out_or_clear
from sqlnb.cli.io import dump_json, model_str
from sqlnb.cli.options import format_option, model_option, source_options
from sqlnb.models.calibration import METHODS, calibrate as fit_calibration, with_calibration


@click.command()
@click.argument("data", required=False)
@model_option()
@click.option("--method", type=click.Choice(METHODS), default="temperature", show_default=True,
              help="temperature (one T, any number of classes), platt (sigmoid of the log-odds, two "
                   "classes), isotonic (pool-adjacent-violators on the log-odds, two classes) or venn-abers "
                   "(an interval [p0, p1] per class and their merged probability; more classes one-vs-rest).")
@click.option("--label", "-y", metavar="COL", help="DATA's label column [default: the model's label].")
@click.option("--clear", is_flag=True, help="Remove the model's calibrator instead (no DATA).")
@format_option
@source_options
@click.pass_obj
def calibrate(settings: Settings, data, model, method, label, clear, fmt, reading):
    """Calibrate MODEL's probabilities on DATA, labelled rows the model was not fitted on.

    The calibrator is stored with the model (replaced in one transaction) and applied
    whenever it scores: score, evaluate and the exported SQL.

    \b
    Example:
      sqlnb calibrate holdout.parquet --model models.duckdb:churn --method temperature
      sqlnb calibrate holdout.parquet --model models.duckdb:churn --method isotonic --label churned
      sqlnb calibrate holdout.parquet --model models.duckdb:churn --method venn-abers
      sqlnb calibrate --model models.duckdb:churn --clear
    """
    done = _held_out_or_clear(settings, "calibrate", data, model, reading, clear, "the calibrator", "the calibrator",
                              "calibrate on", with_calibration,
                              lambda m, source, con: fit_calibration(m, source, method, label=label, con=con))
    if done is None:
        return
    m, loc = done
    cal = m.calibration
    click.echo(dump_json(cal.describe()) if fmt == "json" else f"calibrated {model_str(loc)}: {cal.summary()}")
