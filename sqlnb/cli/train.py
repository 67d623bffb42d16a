"""``sqlnb fit``: fit naive Bayes (or LDA, QDA, logistic regression) on DATA in one scan
and save it as MODEL, in DuckDB or on the ``--engine`` warehouse.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Callable

import click

from sqlnb import api
from sqlnb.cli.app import Settings
from sqlnb.cli.io import check_new_model, model_str, save
from sqlnb.cli.options import (_options, alpha_option, assignments, column_options, source_options, data_spec,
                               feature_plan_args, keep_columns_option, kind_options, label_option, model_kind_args,
                               model_kind_option, model_location, model_option, parse_bins, parse_class_prior,
                               parse_prior_alpha,
                               replace_option, split_list, text_args, text_options, bins_option)
from sqlnb.errors import SqlnbError
from sqlnb.io.locations import data_source
from sqlnb.models.naive_bayes.hyperparameters import ESTIMATORS, UNSEEN
from sqlnb.models.naive_bayes.tan import STRUCTURES


def parse_beta(text: str | None) -> tuple[float, float] | None:
    """``--beta B1,B0`` as a pair of numbers (checked further by the model)."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 2:
        raise SqlnbError(f"--beta takes two numbers B1,B0 (e.g. --beta 2,1), not {text!r}")
    return values


@dataclass(frozen=True)
class FitOptions:
    """What fit's model options ask for: the model kind (``naive_bayes``, ``lda``, ``qda``
    or ``logistic``) and the keyword arguments of :func:`sqlnb.fit` for it."""

    model: str
    params: dict


_fit_flags = _options(
    model_kind_option,
    column_options,
    alpha_option("Pseudo-count of discrete features (default 1: Laplace)."),
    click.option("--feature-alpha", multiple=True, metavar="COL=A",
                 help="Pseudo-count of columns: COL=A, repeatable or comma-separated."),
    click.option("--beta", metavar="B1,B0", help="Beta(B1, B0) prior of Bernoulli features: pseudo-counts of a "
                 "present and of an absent value (default: --alpha for both)."),
    click.option("--estimator", type=click.Choice(ESTIMATORS), help="posterior-mean (default), map or mle."),
    click.option("--var-smoothing", type=float,
                 help="Gaussian variance floor, fraction of the largest variance (1e-9)."),
    click.option("--class-prior", metavar="fitted|uniform|dirichlet|LABEL=P,...", help="Class prior (default fitted)."),
    click.option("--prior-alpha", metavar="A|LABEL=A,...",
                 help="Concentration of the dirichlet class prior (implies --class-prior dirichlet): one A, or A "
                      "per class, e.g. --prior-alpha yes=5,no=2 (a class left out takes 1; default 1)."),
    click.option("--norm", is_flag=True, default=None, help="Complement naive Bayes weight normalisation."),
    click.option("--unseen", type=click.Choice(UNSEEN),
                 help="Unseen categories: missing (no evidence, default) or bucket."),
    click.option("--structure", metavar="|".join(STRUCTURES) + "|kdb:K|A+B+…",
                 help="naive (default) or tan: tree-augmented naive Bayes (each discrete feature also conditioned "
                      "on one other, a Chow-Liu tree; one more scan); kdb:K (K = 1, 2): each discrete feature "
                      "conditioned on up to K features of higher mutual information with the class (Sahami's "
                      "k-dependence classifier; kdb:2 one more scan); aode: averaged one-dependence estimators "
                      "(every discrete feature in turn the parent of all others; the same counts); A+B+… (e.g. "
                      "tan+kdb:2+aode): the average of those structures' joint probabilities."),
    click.option("--aode-min-count", type=float, metavar="M",
                 help="AODE: a value is a super-parent only if seen in at least M training rows (default 1)."),
    click.option("--tied-variance", is_flag=True, default=None,
                 help="Gaussian features share one variance per feature across classes (the pooled within-class "
                      "variance): log-odds linear in x, e.g. --tied-variance."),
    keep_columns_option,
    bins_option,
    kind_options,
    text_options,
)


def fit_options(command: Callable) -> Callable:
    """Every option of ``sqlnb fit`` that says which model to fit (--kind, the feature
    options, the priors and hyperparameters, the LDA/QDA/logistic and text options,
    --keep-columns), given to the command as one ``fitting`` argument, a
    :class:`FitOptions`. ``sqlnb select`` takes the same decorator, so an option added
    here reaches both commands."""
    @functools.wraps(command)
    def with_fit(*args, kind, feature_kind, features, exclude, weight, binarize, keep_columns, bins, alpha,
                 feature_alpha, beta, estimator, var_smoothing, class_prior, prior_alpha, norm, unseen, structure,
                 aode_min_count, tied_variance, shrinkage, reg_param, C, standardize, token_pattern, no_lowercase, stop_words, min_df, max_df,
                 max_features, select_k, **kwargs):
        # --select-k ranks every discrete feature and bag term together (sqlnb.fit(select_k=))
        text = text_args(token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, None)
        nb_only = {"--bins": parse_bins(bins), "--select-k": select_k, "--alpha": alpha,
                   "--feature-alpha": feature_alpha or None, "--beta": beta, "--estimator": estimator,
                   "--var-smoothing": var_smoothing, "--class-prior": class_prior, "--prior-alpha": prior_alpha,
                   "--norm": norm, "--unseen": unseen, "--structure": structure, "--tied-variance": tied_variance,
                   "--aode-min-count": aode_min_count, "--feature-kind": feature_kind or None, "--weight": weight, "--binarize": binarize or None,
                   "text options": text}
        model_kind, params = model_kind_args(kind, {**nb_only, "--shrinkage": shrinkage, "--reg-param": reg_param,
                                                   "--C": C, "--standardize": standardize})
        if prior_alpha is not None and class_prior is None:
            class_prior = "dirichlet"  # the concentration of the dirichlet prior: asking for it asks for that prior
        elif prior_alpha is not None and class_prior != "dirichlet":
            raise click.UsageError(f"--prior-alpha is the concentration of the dirichlet class prior; with "
                                   f"--class-prior {class_prior} it would be ignored: drop one of the two")
        if model_kind == "naive_bayes":
            params = {k: v for k, v in {
                "alpha": alpha, "beta": parse_beta(beta), "estimator": estimator, "var_smoothing": var_smoothing,
                "class_prior": parse_class_prior(class_prior), "prior_alpha": parse_prior_alpha(prior_alpha),
                "norm": norm, "unseen": unseen, "structure": structure, "tied_variance": tied_variance,
                "aode_min_count": aode_min_count, "feature_alpha": assignments(feature_alpha, "--feature-alpha", float) or None,
            }.items() if v is not None}
            params |= feature_plan_args(kind, feature_kind, features, exclude, weight, binarize) | {"text": text}
            params |= {k: v for k, v in {"bins": parse_bins(bins), "select_k": select_k}.items() if v is not None}
        else:
            params |= {"features": split_list(features), "exclude": split_list(exclude)}
        params["keep_columns"] = split_list(keep_columns)
        return command(*args, fitting=FitOptions(model_kind, params), **kwargs)
    return _fit_flags(with_fit)


@click.command()
@click.argument("data")
@label_option("The label column (NULL labels are skipped).")
@model_option()
@fit_options
@source_options
@replace_option
@click.pass_obj
def fit(settings: Settings, data, label, model, fitting: FitOptions, reading, replace):
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
    if model_kind != "naive_bayes" and settings.remote:
        raise SqlnbError(f"--kind {model_kind} is fitted in DuckDB only; use --engine duckdb")
    check_new_model(settings, target, replace)
    start = time.perf_counter()
    if settings.remote:  # columns screening leaves out are noted on stderr (sqlnb.cli.app)
        m = api.fit(spec, label, con=settings.warehouse(), **params)
    else:
        with settings.working(), settings.connect() as con:
            m = api.fit(data_source(con, spec, keep_text=(label,)), label, con=con, model=model_kind, **params)
    if hasattr(m, "log_parameters"):
        # Derive the log-parameters now: a setting that cannot be applied to these
        # statistics (e.g. MAP with alpha < 1 on a zero count) fails before saving.
        m.log_parameters()
    save(settings, m, target, replace)
    skipped = m.report.get("null_label_rows") or 0
    settings.summary(f"fitted {model_str(target)}: {m.report.get('rows', 0):,} rows"
                     + (f" ({skipped:,} with a NULL label skipped)" if skipped else "")
                     + f", {len(m.classes)} classes, {len(m.features)} features, {time.perf_counter() - start:.2f} s")
