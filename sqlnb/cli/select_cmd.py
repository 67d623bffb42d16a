"""``sqlnb select``: choose naive Bayes features by cross-validated forward or backward
selection (:mod:`sqlnb.workflows.select`), print the path and save the chosen subset's
model. It takes every option ``sqlnb fit`` takes (:func:`sqlnb.cli.options.fit_options`).
"""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.io import check_new_model, dump_json, model_str, save
from sqlnb.cli.options import FitOptions, data_spec, fit_options, format_option, label_option, model_location, \
    model_option, replace_option, seed_option, source_options
from sqlnb.errors import SqlnbError
from sqlnb.io.locations import data_source
from sqlnb.workflows.select import DIRECTIONS, Selection, select_features


def selection_text(s: Selection) -> str:
    """The path as a table (step, change, features, CV error, CV log loss), then the choice."""
    lines = [f"{s.direction} selection, {s.folds}-fold cross-validation (seed {s.seed}), rows per fold: "
             + ", ".join(map(str, s.fold_rows)), ""]
    width = max(len("change"), len("(prior only)"), *(len(p["change"] or "") for p in s.path))
    lines.append(f"{'step':>4}  {'change':<{width}}  {'features':>8}  {'CV error':>8}  {'CV log loss':>11}")
    for p in s.path:
        change = p["change"] or ("(prior only)" if not p["subset"] else "(all)")
        lines.append(f"{p['step']:>4}  {change:<{width}}  {p['size']:>8}  {p['error']:>8.4f}  {p['log_loss']:>11.4f}")
    best = s.path[s.chosen]
    lines += ["", f"chosen: step {best['step']}, {best['size']} feature{'s' if best['size'] != 1 else ''}: "
              + (", ".join(best["subset"]) or "none (the class prior)")]
    return "\n".join(lines)


@click.command()
@click.argument("data")
@label_option("The label column (NULL labels are skipped).")
@model_option("Where to save the chosen subset's model, fitted on every row (optional).", required=False)
@click.option("--direction", type=click.Choice(DIRECTIONS), default="forward", show_default=True,
              help="forward: add features one at a time from none; backward: remove them one at a time from all.")
@click.option("--folds", type=int, default=5, show_default=True, help="Number of folds (>= 2).")
@seed_option("Seed of the hash that shuffles each class's rows into the folds.", default=0)
@click.option("--key", metavar="COLUMN", help="An integer column (a row id) hashed to shuffle the rows into the folds "
              "(default: a hash of every column), as for sqlnb cv.")
@click.option("--until-all", is_flag=True, help="Walk the whole path (every feature added, or every one removed) "
              "and choose its best subset, instead of stopping when a step does not improve.")
@fit_options
@format_option
@source_options
@replace_option
@click.pass_obj
def select(settings: Settings, data, label, model, direction, folds, seed, key, until_all, fitting: FitOptions,
           fmt, reading, replace):
    """Choose naive Bayes features by k-fold cross-validation, forward or backward.

    Each step cross-validates every subset one feature away from the current one and
    moves to the best (lowest CV error, then lowest CV log loss, then column order)
    while it improves; prints the path (the subset, CV error and CV log loss of each
    step) and, with --model, saves the chosen subset's model fitted on every row. One
    scan of DATA gives every fold's statistics, from which every subset's fold models
    are derived; each step reads the held-out rows once to score all its candidates.
    Takes every option of sqlnb fit (--kind, --feature-kind, priors, ...), applied to
    every subset; --features/--exclude say which columns are candidates.

    \b
    Example:
      sqlnb select train.parquet --label y --folds 10 --model models.duckdb:fss
      sqlnb select adult.duckdb:adult_train --label income --folds 10 --direction backward \\
          --feature-kind age=categorical,capital-gain=categorical --model models.duckdb:bss --format json
    """
    if folds < 2:
        raise SqlnbError(f"--folds must be at least 2, not {folds}")
    if fitting.model != "naive_bayes":
        raise SqlnbError(f"sqlnb select chooses the features of naive Bayes, not of --kind {fitting.model}")
    if settings.remote:
        raise SqlnbError(f"sqlnb select runs in DuckDB, not on --engine {settings.engine}; use --engine duckdb")
    target = model_location(settings, model) if model else None
    spec = data_spec(settings, data, reading)
    if target is not None:
        check_new_model(settings, target, replace)
    with settings.working(), settings.connect() as con:
        s = select_features(data_source(con, spec, keep_text=(label,)), label, con=con, direction=direction,
                            folds=folds, seed=seed, key=[key] if key else None, until_all=until_all,
                            refit=target is not None, **fitting.params)
    if target is not None:
        save(settings, s.model, target, replace)
    click.echo(dump_json(s.to_dict()) if fmt == "json" else selection_text(s))
    settings.summary(f"{s.direction} selection: {s.evaluated} subsets x {s.folds} folds, {s.scans['scoring']} "
                     f"scoring reads, {s.seconds:.2f} s" + (f"; saved {model_str(target)}" if target else ""))
