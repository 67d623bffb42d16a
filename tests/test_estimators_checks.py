"""scikit-learn's own estimator checks over every sqlnb estimator.

scikit-learn's API contract (cloning, pickling, get/set_params, input validation,
pandas input, sample weights, partial_fit, ...) runs on each estimator through
``estimator_checks_generator``, the generator behind ``parametrize_with_checks``, with
its ``expected_failed_checks``: the checks expected to fail are listed per estimator in
``EXPECTED_FAILED``, each with its reason (a documented difference from scikit-learn,
not a defect), and are marked xfail (strict: one that starts passing fails the run).
The generator is used instead of the decorator only to leave out the one check listed in
``NOT_RUN`` (its reason beside it).
"""

from __future__ import annotations

import warnings

import pytest
from sklearn.utils.estimator_checks import estimator_checks_generator

from sqlnb.estimators import ESTIMATORS

_WEIGHT_ZERO = ("a value (category, or cut point) seen only in rows of weight 0 is still part of the model "
                "(it widens the smoothing denominator, or places a bin edge), which dropping those rows does not give")
_LEAVE_ONE_OUT = ("leave-one-out takes one row out at a time: a row repeated is two rows, each scored without the "
                  "other's copy out, a row of weight 2 one row taken out whole, so the (k, s) chosen can differ (and, "
                  "as for KDB, " + _WEIGHT_ZERO + ")")

#: Check name -> why it fails, per estimator class name.
EXPECTED_FAILED: dict[str, dict[str, str]] = {
    "CategoricalNB": {"check_sample_weight_equivalence_on_dense_data": _WEIGHT_ZERO},
    "TreeAugmentedNB": {"check_sample_weight_equivalence_on_dense_data": _WEIGHT_ZERO},
    "AveragedOneDependenceNB": {"check_sample_weight_equivalence_on_dense_data": _WEIGHT_ZERO},
    "KDependenceNB": {"check_sample_weight_equivalence_on_dense_data": _WEIGHT_ZERO},
    "AveragedStructuresNB": {"check_sample_weight_equivalence_on_dense_data": _WEIGHT_ZERO},
    "SelectiveKDependenceNB": {"check_sample_weight_equivalence_on_dense_data": _LEAVE_ONE_OUT},
    "EnsembleSelectiveKDependenceNB": {"check_sample_weight_equivalence_on_dense_data":
                                       "in every member, " + _LEAVE_ONE_OUT},
    "WeightedNB": {"check_sample_weight_equivalence_on_dense_data":
                   "l2 is chosen by cross-validation over folds of rows: a row repeated is two rows dealt to folds, a "
                   "row of weight 2 is one, so the folds, and the l2 chosen on them, differ"},
}

#: Checks not run, with why (they cannot pass or fail here).
NOT_RUN = {
    # Needs SCIPY_ARRAY_API=1 set before scipy is first imported, which one test file
    # cannot do in a shared pytest process: without it the check skips, and CI counts a
    # skip as a failure (tests/support/ci.py). Numpy input is what every other check feeds.
    "check_array_api_input",
}


def _check_name(check) -> str:
    return getattr(check, "func", check).__name__


def _cases():
    for cls in ESTIMATORS:
        expected = EXPECTED_FAILED.get(cls.__name__, {})
        for case in estimator_checks_generator(cls(), legacy=True, expected_failed_checks=expected, mark="xfail",
                                               xfail_strict=True):
            values = case.values if hasattr(case, "values") else case  # an xfail case is a pytest.param
            if _check_name(values[1]) not in NOT_RUN:
                yield case


def _id(value) -> str:
    if hasattr(value, "get_params"):
        return type(value).__name__
    keywords = ",".join(f"{k}={v}" for k, v in getattr(value, "keywords", {}).items())
    return _check_name(value) + (f"({keywords})" if keywords else "")


@pytest.mark.parametrize("estimator, check", list(_cases()), ids=_id)
def test_sklearn_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_expected_failures_name_real_checks():
    """Every listed check name exists for its estimator (a typo would xfail nothing)."""
    for cls in ESTIMATORS:
        names = {_check_name(c) for _, c in estimator_checks_generator(cls(), legacy=True)}
        for listed in EXPECTED_FAILED.get(cls.__name__, {}):
            assert listed in names, (cls.__name__, listed)
