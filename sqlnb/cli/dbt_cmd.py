"""``sqlnb dbt``: a dbt package (and, on request, a runnable project) from a stored model
(:mod:`sqlnb.workflows.dbt`)."""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.io import load
from sqlnb.cli.options import data_spec, label_option, model_location, model_option, source_options
from sqlnb.cli.predict import labels_option, measure
from sqlnb.errors import SqlnbError
from sqlnb.io.locations import DbObject
from sqlnb.workflows import dbt

#: The figures of ``sqlnb evaluate`` the docs block lists with --evaluate.
METRICS = ("rows", "accuracy", "log_loss", "brier", "macro_f1", "roc_auc", "macro_roc_auc")


@click.command("dbt")
@model_option()
@click.option("--out", "-o", required=True, metavar="DIR",
              help="The directory to write: the package (or, with --project, the project).")
@click.option("--name", metavar="NAME",
              help="Names the package sqlnb_NAME and its macro score_NAME [default: the model's name].")
@click.option("--project", is_flag=True,
              help="Write a runnable example project in DIR around the package (dbt_project.yml, a DuckDB "
                   "profiles.yml, a source over --table), with the package in DIR/dbt_packages.")
@click.option("--table", metavar="[SCHEMA.]TABLE",
              help="With --project: the table the example scores, in the model's DuckDB file.")
@click.option("--evaluate", "evaluate_on", metavar="DATA",
              help="Also evaluate the model on labelled DATA and list the figures in the docs block.")
@label_option("With --evaluate: the label column in DATA (default: the model's).", required=False)
@labels_option
@source_options
@click.pass_obj
def dbt_command(settings: Settings, model, out, name, project, table, evaluate_on, label, labels, reading):
    """Write a dbt package that scores with MODEL, in the warehouse, under dbt.

    The package sqlnb_NAME holds the macro score_NAME(relation, columns=none): the
    scoring SELECT of 'sqlnb sql' over relation, for the adapter dbt runs (duckdb,
    postgres, spark), passing columns through (default: all of relation's). An example
    model NAME_scored, its tests (prediction not null and among the classes;
    probabilities in [0, 1] summing to 1 within 1e-9; the model's fingerprint unchanged
    in the warehouse's sqlnb.models, so that after a refit the test fails until the
    package is written again) and a docs block (what 'sqlnb show' knows). Writing again
    changes only the files whose content changed; each file is listed on stdout as
    'wrote' or 'unchanged'. See docs/dbt.md.

    \b
    Example:
      sqlnb dbt --model models.duckdb:churn --out dbt/sqlnb_churn
      sqlnb dbt --model wh.duckdb:churn --out churn_project --project --table customers
      (cd churn_project && dbt build --profiles-dir .)
      sqlnb --engine postgres --dsn 'dbname=lake' dbt --model churn --out dbt/sqlnb_churn
    """
    if project and not table:
        raise SqlnbError("--project writes a source over a table: give --table TABLE (in the model's DuckDB file)")
    if table and not project:
        raise SqlnbError("--table names the example project's source; give it with --project")
    if (label or labels != "present" or reading) and not evaluate_on:
        raise SqlnbError("--label, --labels and the reading options apply to --evaluate DATA; give --evaluate")
    loc = model_location(settings, model)
    if project and not isinstance(loc, DbObject):
        raise SqlnbError("--project writes a DuckDB profile around the model's DuckDB file; with a warehouse "
                         "engine, write the package alone (leave out --project) and add it to your project")
    m = load(settings, model)
    pkg = dbt.package_name(m, name)
    metrics = None
    if evaluate_on:
        ev = measure(settings, m, data_spec(settings, evaluate_on, reading), label, curves=False, labels=labels)[0]
        metrics = {k: getattr(ev, k) for k in METRICS if getattr(ev, k, None) is not None}
    if project:
        schema, _, tname = table.rpartition(".")
        files = dbt.project_files(m, pkg, loc.db, tname, schema or None, metrics)
    else:
        files = dbt.package_files(m, pkg, metrics)
    for adapter, why in dbt.unsupported(m).items():
        click.echo(f"note: score_{pkg} raises on {adapter}: {why}", err=True)
    for path, written in dbt.write_files(out, files):
        click.echo(f"{'wrote' if written else 'unchanged'}  {path}")
