"""``sqlnb report``: one self-contained HTML page about a model on labelled data
(:mod:`sqlnb.workflows.html_report`)."""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.io import load, write_text_file
from sqlnb.cli.options import data_spec, label_option, model_option, replace_option, source_options
from sqlnb.cli.predict import labels_option, measure, set_coverage
from sqlnb.errors import SqlnbError
from sqlnb.io import output
from sqlnb.io.locations import FileOut
from sqlnb.workflows import html_report


@click.command("report")
@click.argument("data")
@model_option()
@click.option("--out", "-o", required=True, metavar="FILE.html", help="The HTML file to write.")
@label_option("The label column in DATA (default: the model's).", required=False)
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True, help="Features listed per class.")
@replace_option
@labels_option
@source_options
@click.pass_obj
def report(settings: Settings, data, model, out, label, top, replace, labels, reading):
    """Write one HTML page about MODEL on labelled DATA: the model's summary and
    parameters, the decision rule, the metrics of 'sqlnb evaluate', the confusion
    matrix, reliability diagram, ROC and precision-recall curves, and the features that
    set each class apart. A model with conformal sets (sqlnb conformal) adds their
    coverage and mean set size, overall, per class and by set size.

    The page is self-contained: the plots are inline SVG, the style inline, and it loads
    nothing from anywhere (open it offline, attach it to a ticket). The figures are
    computed in SQL (DATA scored once into a temporary table that the figures and the
    curves read; one more pass with sets); no scored row reaches Python.

    \b
    Example:
      sqlnb report test.parquet --model models.duckdb:churn --out report.html
      sqlnb report db.duckdb:holdout --model db.duckdb:churn --out reports/churn.html --replace
    """
    if not out.lower().endswith((".html", ".htm")):
        raise SqlnbError(f"--out writes an HTML page; give a .html file name, not {out!r}")
    output.check_target(FileOut(out, "html"), replace)
    spec = data_spec(settings, data, reading)
    m = load(settings, model)
    ev, _, points, description = measure(settings, m, spec, label, curves=True, labels=labels)
    sets = set_coverage(settings, m, spec, label) if m.conformal is not None else None
    write_text_file(out, html_report.render(m, ev, points, description, top=top, sets=sets))
    settings.summary(f"report on {ev.rows:,} rows written to {out}")
