"""The saved models: ``sqlnb show`` (describe one), ``sqlnb models`` (list a database's)
and ``sqlnb drop`` (delete one, in DuckDB or on the ``--engine`` warehouse).
"""

from __future__ import annotations

import os

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.io import dump_json, load
from sqlnb.cli.options import format_option, model_location, model_option
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.text import top_terms
from sqlnb.store import drop_model, list_models
from sqlnb.workflows.parameters import parameters, parameters_text
from sqlnb.workflows.report import describe, models_text, show_text


@click.command()
@model_option()
@format_option
@click.option("--top", type=click.IntRange(min=0), default=5, show_default=True,
              help="Top features listed per family.")
@click.option("--top-terms", "top_terms_n", type=click.IntRange(min=1), metavar="N",
              help="Also the N terms that most indicate each class, per token bag.")
@click.option("--params", "with_params", is_flag=True,
              help="Also every parameter: naive Bayes means, variances and probabilities per class, "
                   "LDA/QDA means, coefficients and covariances, logistic coefficients.")
@click.pass_obj
def show(settings: Settings, model, fmt, top, top_terms_n, with_params):
    """Describe MODEL: label and classes, features and their families,
    hyperparameters, sizes, and the features that tell most about the class
    (per family: mutual information with the class for categorical and bernoulli
    features, so a perfect separator ranks first; the spread of the class means or of
    the per-count weight for the others). --params adds the parameters themselves,
    derived from the stored statistics under the model's hyperparameters.

    \b
    Example:
      sqlnb show --model models.duckdb:churn
      sqlnb show --model models.duckdb:churn --format json --top 10
      sqlnb show --model models.duckdb:spam --top-terms 5
      sqlnb show --model models.duckdb:churn --params --format json
    """
    m = load(settings, model)
    d = describe(m, top)
    if m.decision is not None and not m.decision.is_default:  # sqlnb decide
        d["decision"] = m.decision.to_dict() | {"rule": m.decision.describe()}
    terms = {}
    if top_terms_n is not None:
        bags = [f.name for f in getattr(m, "features", []) if getattr(f, "bag", None) is not None]
        if not bags:
            raise SqlnbError("--top-terms lists the terms of token bags; this model has none")
        terms = {b: top_terms(m, b, top_terms_n).to_pylist() for b in bags}
    params = parameters(m) if with_params else None
    if fmt == "json":
        click.echo(dump_json(d | ({"top_terms": terms} if terms else {})
                             | ({"parameters": params} if with_params else {})))
        return
    click.echo(show_text(d))
    if "decision" in d:
        click.echo(f"\ndecision     {d['decision']['rule']}")
    if with_params:
        click.echo("\n" + parameters_text(params))
    for bag, rows in terms.items():
        click.echo(f"\ntop terms of {bag}")
        for cls in dict.fromkeys(r["class"] for r in rows):
            click.echo(f"  {cls}: " + ", ".join(r["term"] for r in rows if r["class"] == cls))


@click.command()
@click.argument("db", metavar="DB.duckdb", required=False)
@format_option
@click.pass_obj
def models(settings: Settings, db, fmt):
    """List the models saved in a DuckDB database (with --engine, in the engine's catalog).

    \b
    Example:
      sqlnb models models.duckdb
      sqlnb models models.duckdb --format json
      sqlnb --engine spark models
    """
    if settings.remote:
        if db is not None:
            raise SqlnbError(f"with --engine {settings.engine}, models lists the engine's catalog; give no DB")
        found, where = list_models(settings.warehouse()), f"on {settings.engine}"
    elif db is None:
        raise SqlnbError("sqlnb models needs DB.duckdb, the database to list (e.g. sqlnb models models.duckdb)")
    else:
        with settings.connect(db, read_only=True) as con:
            found, where = list_models(con), f"in {db}"
    if fmt == "json":
        click.echo(dump_json(found))
    elif found:
        click.echo(models_text(found))
    else:
        settings.summary(f"no models {where}")


@click.command()
@model_option()
@click.pass_obj
def drop(settings: Settings, model):
    """Delete MODEL and its tables (in one transaction).

    \b
    Example:
      sqlnb drop --model models.duckdb:old-churn
    """
    loc = model_location(settings, model)
    if isinstance(loc, str):
        drop_model(settings.warehouse(), loc)
        settings.summary(f"dropped {loc!r} on {settings.engine}")
        return
    if not os.path.exists(loc.db):
        raise SqlnbError(f"database {loc.db!r} does not exist; check the path")
    with settings.connect(loc.db) as con:
        drop_model(con, loc.name)
    settings.summary(f"dropped {loc.name!r} from {loc.db}")
