"""Decision rules on the command line: ``sqlnb decide`` stores one with a model, and
``score``, ``sql`` and ``evaluate`` take the same options (:data:`decision_options`) to
use another for one call. The rules themselves are :mod:`sqlnb.models.decision`.
"""

from __future__ import annotations

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.io import model_str, modify
from sqlnb.cli.options import _options, model_option
from sqlnb.errors import SqlnbError
from sqlnb.models.decision import DecisionRule

_COSTS_HELP = ("A CSV file with the header actual,predicted,cost: predict the class of minimum expected cost "
               "(pairs not listed cost 0 on the diagonal, 1 off it); adds an expected_cost column.")
_THRESHOLD_HELP = "Two classes: predict CLASS when p(CLASS|x) >= P (e.g. '>50K=0.3')."
_REJECT_HELP = ("Chow's reject option: no prediction (NULL, rejected = true) where the smallest expected loss "
                "exceeds R (with 0/1 costs: where max p < 1 - R).")


def decision_options(scope: str):
    """--costs, --threshold and --reject; ``scope`` ends each help text (what the rule is for)."""
    return _options(
        click.option("--costs", metavar="FILE", help=f"{_COSTS_HELP} {scope}".rstrip()),
        click.option("--threshold", metavar="CLASS=P", help=f"{_THRESHOLD_HELP} {scope}".rstrip()),
        click.option("--reject", type=float, metavar="R", help=f"{_REJECT_HELP} {scope}".rstrip()),
    )


#: The options of ``score``, ``sql`` and ``evaluate``: a rule for this call only.
override_options = decision_options("For this call, instead of the model's stored rule.")


def use_rule(m, costs: str | None, threshold: str | None, reject: float | None):
    """``m`` with the rule of the options when any is given (the stored one otherwise)."""
    if costs is not None or threshold is not None or reject is not None:
        m.decision = DecisionRule.for_model(m, costs, threshold, reject)
    return m


@click.command()
@model_option()
@decision_options("")
@click.option("--clear", is_flag=True, help="Remove the stored rule: predict the most probable class again.")
@click.pass_obj
def decide(settings: Settings, model, costs, threshold, reject, clear):
    """Store a decision rule with MODEL: every later score, sql and evaluate uses it.

    The prediction becomes the class of minimum expected cost under a cost matrix
    (--costs), or the class above a probability threshold (--threshold, two classes),
    optionally with Chow's reject option (--reject): such rows get no prediction. The
    rule is computed in the scoring SELECT, on every engine and in exported SQL, and
    adds the columns expected_cost (and rejected, with --reject) after prediction.
    Each call sets the whole rule; sqlnb show prints the rule in force.

    \b
    Example:
      printf 'actual,predicted,cost\\n>50K,<=50K,5\\n' > costs.csv
      sqlnb decide --model models.duckdb:adult --costs costs.csv
      sqlnb decide --model models.duckdb:adult --threshold '>50K=0.3' --reject 0.2
      sqlnb decide --model models.duckdb:adult --clear
    """
    given = costs is not None or threshold is not None or reject is not None
    if clear == given:
        raise SqlnbError("give --costs FILE, --threshold CLASS=P and/or --reject R, or --clear alone")
    def change(m):
        m.decision = None if clear else DecisionRule.for_model(m, costs, threshold, reject)  # validated before saving
        return m
    m, loc = modify(settings, model, change)  # saved only over the model read
    settings.summary(f"{model_str(loc)}: " + ("the most probable class" if m.decision is None
                                               else m.decision.describe()))
