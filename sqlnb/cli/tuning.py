"""Model selection: ``sqlnb cv`` (k-fold cross-validation over a grid of
hyperparameters, optionally refitting the best) and ``sqlnb compare`` (learning curves of
naive Bayes, LDA, QDA and logistic regression), with their option parsing and reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import click

from sqlnb import api
from sqlnb.cli.app import Settings
from sqlnb.cli.io import check_new_model, dump_json, model_str, save, write_text_file
from sqlnb.cli.options import (KIND_OPTIONS, FitOptions, data_spec, fit_options, source_options, features_options,
                               format_option, label_option, model_location, model_option, reg_param_option,
                               replace_option, seed_option, shrinkage_option, split_list)
from sqlnb.errors import SqlnbError
from sqlnb.engines import as_engine
from sqlnb.io import output
from sqlnb.io.locations import FileOut, data_source
from sqlnb.workflows import compare as compare_module
from sqlnb.source import read_with
from sqlnb.workflows.cv import assign_folds, cross_validate, fold_source


def _grid_value(text: str) -> Any:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return float(text)
    except ValueError:
        return text


def parse_grid(values: tuple[str, ...]) -> dict[str, list] | None:
    """``--grid NAME=V1,V2`` (repeatable) -> {NAME: [V1, V2]}; numbers become floats."""
    grid = {}
    for item in values:
        name, eq, rest = item.partition("=")
        vals = [v.strip() for v in rest.split(",") if v.strip()]
        if not eq or not name.strip() or not vals:
            raise SqlnbError(f"--grid takes NAME=V1,V2,..., not {item!r}")
        grid[name.strip().replace("-", "_")] = [_grid_value(v) for v in vals]
    return grid or None


def cv_text(r) -> str:
    """Per grid point: each metric per fold and its mean; then the best point."""
    def params(p: dict) -> str:
        return ", ".join(f"{k}={v}" for k, v in p.items()) or "(defaults)"
    width = max(len("params"), *(len(params(x["params"])) for x in r.results))
    head = f"{'params':<{width}}  {'metric':<8}  " + "  ".join(f"{'fold ' + str(i + 1):>7}" for i in range(r.folds))
    lines = [f"{r.folds}-fold cross-validation of {r.model} (seed {r.seed}), rows per fold: "
             + ", ".join(map(str, r.fold_rows)), "", head + f"  {'mean':>7}"]
    for x in r.results:
        for metric, name in (("accuracy", "accuracy"), ("log_loss", "log loss")):
            cells = "  ".join(f"{v:>7.4f}" for v in x[metric])
            lines.append(f"{params(x['params']) if metric == 'accuracy' else '':<{width}}  {name:<8}  {cells}"
                         f"  {x['mean_' + metric]:>7.4f}")
    lines += ["", f"best ({r.scoring}): {params(r.best_params)}"]
    return "\n".join(lines)


@click.command()
@click.argument("data")
@label_option("The label column.")
@model_option("With --refit: where to save the best model.", required=False)
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True, help="Number of folds.")
@seed_option("Seed of the hash that shuffles each class's rows into the folds.", default=0)
@click.option("--key", metavar="COLUMN",
              help="An integer column (a row id) hashed to shuffle the rows into the folds: the same folds on every engine "
                   "(required with --engine postgres|spark; default: a hash of every column, in DuckDB).")
@click.option("--grid", multiple=True, metavar="NAME=V1,V2",
              help="Hyperparameter values to try (repeatable: the grid is their product).")
@click.option("--scoring", type=click.Choice(["accuracy", "log_loss"]), default="accuracy", show_default=True,
              help="What picks the best grid point.")
@click.option("--refit", is_flag=True, help="Fit the best grid point on all rows and save it as --model.")
@fit_options
@click.option("--copy/--no-copy", "copy_source", default=True, show_default=True,
              help="Read DATA once into a temporary table and cross-validate on the copy; --no-copy reads DATA twice.")
@format_option
@source_options
@replace_option
@click.pass_obj
def cv(settings: Settings, data, label, model, folds, seed, key, grid, scoring, refit, fitting: FitOptions,
       copy_source, fmt, reading, replace):
    """Cross-validate on DATA, optionally over a grid of hyperparameters.

    Folds are stratified (as scikit-learn's StratifiedKFold): each class's rows, shuffled by
    a hash of their values or of --key (and --seed), are dealt to the folds in turn, so per
    class the fold sizes differ by at most one. One scan collects every fold's statistics. Prints accuracy and log loss per fold and their
    means; with --refit the best grid point is fitted on all rows and saved as --model.
    Takes every model option of sqlnb fit (--kind, --feature-kind, --bins, --structure,
    --alpha, --shrinkage, --reg-param, ...), the same for every fold and grid point; --grid
    values replace them. --bins cuts each fold's model on its training rows, as sqlnb fit on them.
    With --engine postgres|spark (naive Bayes, LDA, QDA) everything runs on the engine
    and only aggregates come back; --key is then required.

    \b
    Example:
      sqlnb cv train.parquet --label y --grid 'alpha=0.1,0.5,1' --grid 'estimator=map,posterior-mean'
      sqlnb cv adult.csv --null-string '?' --label income --bins mdl --structure tan --folds 10
      sqlnb cv train.parquet --label y --kind lda --grid 'shrinkage=0,0.1,0.5' --refit \\
          --model models.duckdb:best --format json
      sqlnb --engine spark cv s3a://lake/train/ --label y --key id --grid 'alpha=0.1,1'
    """
    if refit != (model is not None):
        raise SqlnbError("--refit and --model go together: --refit saves the best model as --model")
    target = model_location(settings, model) if model else None
    spec = data_spec(settings, data, reading)
    points = parse_grid(grid)
    if target is not None:
        check_new_model(settings, target, replace)
    args = dict(model=fitting.model, folds=folds, seed=seed, key=[key] if key else None, grid=points, scoring=scoring,
                refit=refit, materialize_source=copy_source, **fitting.params)
    if settings.remote:
        r = cross_validate(spec, label, con=settings.warehouse(), **args)
    else:
        with settings.working(), settings.connect() as con:
            r = cross_validate(data_source(con, spec, keep_text=(label,)), label, con=con, **args)
    if target is not None:
        save(settings, r.best_model, target, replace)
    if fmt == "json":
        click.echo(dump_json({k: v for k, v in dataclasses.asdict(
            dataclasses.replace(r, best_model=None)).items() if k != "best_model"}))
    else:
        click.echo(cv_text(r))
    settings.summary(f"cross-validated {len(r.results)} grid points x {folds} folds in {r.seconds:.2f} s"
                     + (f"; saved the best as {model_str(target)}" if target else ""))


@click.command()
@click.argument("data")
@label_option("The label column.")
@click.option("--test", "test_data", metavar="DATA", help="Test rows (default: a quarter of DATA, by hash).")
@click.option("--models", "kinds", multiple=True, metavar="KIND,...",
              help=f"Model kinds to compare (default: all of {', '.join(api.MODELS)}).")
@click.option("--sizes", multiple=True, metavar="N,...", help="Training sizes (default: 8 log-spaced sizes).")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, help="Random subsets per size.")
@seed_option("Seed of the subsets (and of the split).", default=0)
@click.option("--key", metavar="COLUMN",
              help="An integer column (a row id) whose hash orders the rows: the same subsets on every engine "
                   "(required with --engine postgres|spark; default: a hash of every column, in DuckDB).")
@features_options("Feature columns (default: all but the label).")
@click.option("--plot", metavar="FILE.svg", help="Also draw the learning curves as an SVG file.")
@click.option("--binarize", type=float, default=None, metavar="T",
              help="Numeric features become indicators x > T for every kind (Bernoulli naive Bayes).")
@click.option("--C", "C", type=float, default=None, metavar="FLOAT",
              help="Inverse L2 penalty of logistic regression (default 1.0, as scikit-learn; "
                   "Ng & Jordan compare with unpenalised logistic regression, e.g. --C 1e4).")
@shrinkage_option
@reg_param_option
@format_option
@source_options
@replace_option
@click.pass_obj
def compare(settings: Settings, data, label, test_data, kinds, sizes, repeats, seed, key, features, exclude, plot,
            binarize, C, shrinkage, reg_param, fmt, reading, replace):
    """Learning curves: test error of naive Bayes, LDA, QDA and logistic regression
    against the number of training rows.

    Prints mean test error (%) ± std over --repeats random subsets per size (a Markdown
    table); --plot draws them (written to a temporary file, then moved over FILE.svg).
    Naive Bayes takes categorical columns as they are; LDA, QDA and logistic regression
    their one-hot indicators (categories from the training rows). --binarize T turns
    numeric features into indicators x > T for every kind (Bernoulli naive Bayes): with
    a weak penalty (--C 1e4) that is Ng & Jordan's generative-discriminative pair.
    One-hot indicators of a column sum to one, so LDA and unregularised QDA are undefined
    on them: --shrinkage (LDA) and --reg-param (QDA) regularise them, as in sqlnb fit.
    With --engine postgres|spark (and --key) every fit and test runs on the engine;
    logistic regression, fitted in Python on the training rows, is left out there.

    \b
    Example:
      sqlnb compare train.parquet --label y --test test.parquet --plot curves.svg
      sqlnb compare data.parquet --label y --sizes 20,50,100 --repeats 3 --models naive_bayes,lda
      sqlnb compare adult.csv --null-string '?' --label income --shrinkage 0.1 --reg-param 0.1
    """
    if C is not None and not (C > 0 and C < float("inf")):
        raise SqlnbError(f"--C must be a positive finite number, not {C!r}")
    if plot is not None:
        if not plot.lower().endswith(".svg"):
            raise SqlnbError(f"--plot writes SVG; give a .svg file name, not {plot!r}")
        output.check_target(FileOut(plot, "svg"), replace)
    try:
        size_list = [int(s) for s in split_list(sizes)] if sizes else None
    except ValueError:
        raise SqlnbError(f"--sizes takes whole numbers, not {','.join(sizes)!r}") from None
    spec = data_spec(settings, data, reading)
    test_spec = data_spec(settings, test_data, reading) if test_data else None
    models = split_list(kinds) or None
    # As fit refuses an option of another --kind: an LDA or QDA option without that kind.
    regularised = {option: value for option, value in (("--shrinkage", shrinkage), ("--reg-param", reg_param))
                   if value is not None}
    for option in regularised:
        name, (kind,) = KIND_OPTIONS[option]
        if models is not None and kind not in models:
            raise SqlnbError(f"{option} applies to {kind} only, which --models leaves out; add {kind} or drop {option}")
    if settings.remote and models is None:
        click.echo(f"note: logistic regression is fitted in Python on the training rows, so with --engine "
                   f"{settings.engine} it is left out; comparing {', '.join(compare_module.ENGINE_MODELS)}", err=True)
    with contextlib.ExitStack() as stack:
        if settings.remote:
            con = settings.warehouse()

            def source(s):
                return con.resolve(read_with(s, keep_text=(label,)))
        else:
            stack.enter_context(settings.working())
            con = stack.enter_context(settings.connect())

            def source(s):
                return data_source(con, s, keep_text=(label,))
        train = source(spec)
        train.require([label], "label column")
        if test_spec is not None:
            test = source(test_spec)
        else:
            # A quarter held out, stratified as cross-validation's folds (sqlnb.workflows.folds).
            train, fold = assign_folds(train, label, 4, seed, [key] if key else None, as_engine(con).dialect)
            train, test = fold_source(train, fold, 0, held_out=False), fold_source(train, fold, 0)
        train, test, options = compare_module.encode(con, train, test, label, split_list(features),
                                                     split_list(exclude), binarize)
        if C is not None:
            options["logistic"]["C"] = C
        for option, value in regularised.items():
            name, (kind,) = KIND_OPTIONS[option]
            options[kind][name] = value
        rows = compare_module.learning_curves(
            train, test, label, con=con, models=models, sizes=size_list,
            repeats=repeats, seed=seed, options=options, key=key)
    table = compare_module.summarize(rows)
    if plot is not None:
        write_text_file(plot, compare_module.svg_plot(table, f"Learning curves: {label}"))
    click.echo(dump_json(table) if fmt == "json" else compare_module.markdown_table(table), nl=fmt == "json")
    settings.summary(f"compared {len(set(r['model'] for r in rows))} model kinds"
                     + (f"; plot in {plot}" if plot else ""))
