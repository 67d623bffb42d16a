"""``sqlnb dbt``: a dbt package (and, on request, a runnable project) from a stored model
(:mod:`sqlnb.workflows.dbt`)."""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.io import check_new_model, load, model_str, save
from sqlnb.cli.options import data_spec, label_option, model_location, model_option, replace_option, source_options
from sqlnb.cli.predict import labels_option, measure
from sqlnb.errors import SqlnbError
from sqlnb.io.locations import DbObject
from sqlnb.workflows import dbt, dbt_train

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
@click.option("--train", is_flag=True,
              help="Also write incremental dbt models that count MODEL's statistics from labelled rows (the "
                   "source sqlnb_NAME_train.rows), for sqlnb dbt-import to read back. See docs/dbt.md.")
@click.option("--loaded-at", metavar="COLUMN",
              help="With --train: an incremental run counts the rows whose COLUMN is greater than the largest "
                   "already counted [default: every row of the source, a batch table of new rows].")
@label_option("With --evaluate: the label column in DATA (default: the model's).", required=False)
@labels_option
@source_options
@click.pass_obj
def dbt_command(settings: Settings, model, out, name, project, table, evaluate_on, train, loaded_at, label, labels,
                reading):
    """Write a dbt package that scores with MODEL, in the warehouse, under dbt.

    The package sqlnb_NAME holds the macro score_NAME(relation, columns=none): the
    scoring SELECT of 'sqlnb sql' over relation, for the adapter dbt runs (duckdb,
    postgres, spark), passing columns through (default: all of relation's). An example
    model NAME_scored, its tests (prediction not null and among the classes;
    probabilities in [0, 1] summing to 1 within 1e-9; the model's fingerprint unchanged
    in the warehouse's sqlnb.models, so that after a refit the test fails until the
    package is written again) and a docs block (what 'sqlnb show' knows). Writing again
    changes only the files whose content changed; each file is listed on stdout as
    'wrote' or 'unchanged'. With --train, also incremental models that count MODEL's
    statistics from labelled rows, models deriving its log-parameters from them and
    the macro score_NAME_trained that scores with those tables. See docs/dbt.md.

    \b
    Example:
      sqlnb dbt --model models.duckdb:churn --out dbt/sqlnb_churn
      sqlnb dbt --model wh.duckdb:churn --out churn_project --project --table customers
      (cd churn_project && dbt build --profiles-dir .)
      sqlnb --engine postgres --dsn 'dbname=lake' dbt --model churn --out dbt/sqlnb_churn
      sqlnb dbt --model wh.duckdb:churn --out dbt/sqlnb_churn --train --loaded-at loaded_at
    """
    if project and not table:
        raise SqlnbError("--project writes a source over a table: give --table TABLE (in the model's DuckDB file)")
    if table and not project:
        raise SqlnbError("--table names the example project's source; give it with --project")
    if (label or labels != "present" or reading) and not evaluate_on:
        raise SqlnbError("--label, --labels and the reading options apply to --evaluate DATA; give --evaluate")
    if loaded_at and not train:
        raise SqlnbError("--loaded-at says which rows the training models count; give it with --train")
    loc = model_location(settings, model)
    if project and not isinstance(loc, DbObject):
        raise SqlnbError("--project writes a DuckDB profile around the model's DuckDB file; with a warehouse "
                         "engine, write the package alone (leave out --project) and add it to your project")
    m = load(settings, model)
    pkg = dbt.package_name(m, name)
    if train:
        dbt_train.check_trainable(m)
    metrics = None
    if evaluate_on:
        ev = measure(settings, m, data_spec(settings, evaluate_on, reading), label, curves=False, labels=labels)[0]
        metrics = {k: getattr(ev, k) for k in METRICS if getattr(ev, k, None) is not None}
    if project:
        schema, _, tname = table.rpartition(".")
        files = dbt.project_files(m, pkg, loc.db, tname, schema or None, metrics)
    else:
        files = dbt.package_files(m, pkg, metrics)
    if train:
        prefix = f"dbt_packages/sqlnb_{pkg}/" if project else ""
        files.update({prefix + path: text for path, text in dbt_train.training_files(m, pkg, loaded_at).items()})
    for adapter, why in dbt.unsupported(m).items():
        click.echo(f"note: score_{pkg} raises on {adapter}: {why}", err=True)
    for path, written in dbt.write_files(out, files):
        click.echo(f"{'wrote' if written else 'unchanged'}  {path}")


@click.command("dbt-import")
@model_option("The model the package was generated from (sqlnb dbt --train): a name in a DuckDB database file.")
@click.option("--schema", metavar="SCHEMA",
              help="The schema dbt wrote the training tables to [default: DuckDB's main, PostgreSQL's public].")
@click.option("--name", metavar="NAME", help="The package's NAME (tables NAME_classes, ...) [default: the model's name].")
@click.option("--as", "save_as", metavar="NAME",
              help="Save the model trained by dbt under NAME, in MODEL's store [default: MODEL's name, with --replace].")
@replace_option
@click.pass_obj
def dbt_import(settings: Settings, model, schema, name, save_as, replace):
    """Read the statistics dbt counted with a package of 'sqlnb dbt --train' back into a model.

    The model keeps MODEL's label, features, families and hyperparameters; its
    statistics are the tables NAME_classes, NAME_moments, NAME_sums and NAME_counts_J
    in SCHEMA, of MODEL's DuckDB file (or of --engine's warehouse). It is then a stored
    model like any other: sqlnb show, score, evaluate and sql use it. See docs/dbt.md.

    \b
    Example:
      (cd churn_project && dbt build --profiles-dir .)
      sqlnb dbt-import --model wh.duckdb:churn --as churn_dbt
    """
    loc = model_location(settings, model)
    m = load(settings, model)
    pkg = dbt.package_name(m, name)
    target = save_as or m.name if isinstance(loc, str) else DbObject(loc.db, save_as or loc.name)
    check_new_model(settings, target, replace)
    if isinstance(loc, str):
        trained = dbt_train.import_model(m, settings.warehouse(), pkg, schema or "public")
    else:
        with settings.connect(loc.db, read_only=True) as con:
            trained = dbt_train.import_model(m, con, pkg, schema or "main")
    save(settings, trained, target, replace)
    settings.summary(f"saved {model_str(target)}: {trained.stats.n_rows:,} rows counted by dbt")
