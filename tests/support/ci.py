"""What "in CI" means for the test suite, and the rule that holds there: no test skips.

A test that needs something the machine lacks (a PostgreSQL server, Java for Spark, the
UCI files in ../shared/data) skips on a user's machine, with the reason. On CI the same skip
would hide a broken install behind a green run, so there every skip is a failure:
:func:`pytest_runtest_makereport` and :func:`pytest_make_collect_report` turn the skipped
report into a failed one (tests/conftest.py imports both hooks; ``pytest -p support.ci``
loads them as a plugin, which is how tests/test_ci_guard.py checks them).

:func:`in_ci` is the one definition of "in CI": the ``CI`` environment variable set to
anything but an empty string, ``0``, ``false`` or ``no`` (in any case). ``.ci/run`` sets
``CI=true`` itself, so the rule does not depend on the CI service exporting it.

An expected failure (``pytest.mark.xfail``) is reported as skipped by pytest too; it is
data about a known gap, not a skip, and stays as it is.
"""

from __future__ import annotations

import os

import pytest

#: The environment variable read by :func:`in_ci`.
CI_VARIABLE = "CI"
_OFF = ("", "0", "false", "no")


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to anything but ``""``, ``0``,
    ``false`` or ``no`` (case and surrounding blanks ignored)."""
    return os.environ.get(CI_VARIABLE, "").strip().lower() not in _OFF


def _reason(longrepr) -> str:
    """The reason of a skipped report (pytest stores ``(path, line, "Skipped: why")``)."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_the_skip(report) -> None:
    """Turn a skipped report into a failed one that says why (in place)."""
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = (f"{_reason(report.longrepr)}\n"
                           f"{CI_VARIABLE}={os.environ.get(CI_VARIABLE)!r}: in CI every test must run; "
                           "a skip is a failure (tests/support/ci.py)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a test skipped in setup, call or teardown (``pytest.skip``, a ``skipif``
    mark, ``importorskip``) fails instead."""
    report = yield
    if in_ci():
        _fail_the_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """In CI, a module skipped as a whole (``pytest.skip(allow_module_level=True)``,
    ``importorskip`` at import time) is a collection error instead."""
    report = yield
    if in_ci():
        _fail_the_skip(report)
    return report
