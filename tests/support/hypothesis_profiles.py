"""Hypothesis budgets for the property tests: the profile ``ci`` (the default) and ``long``.

``ci``   a fixed seed (``derandomize``: each test draws the same examples on every run, so a
         CI failure reproduces locally) and no example database; each property runs the
         ``max_examples`` it names through :func:`examples` (50 to 200 for most).
``long`` fresh random draws on every run, ``LONG_FACTOR`` times the examples; the run to do
         before a release or after touching scoring, fitting or updating::

             HYPOTHESIS_PROFILE=long python -m pytest -p no:cacheprovider \\
                 tests/test_row_order_property.py tests/test_generative.py \\
                 tests/test_parity_sklearn.py tests/test_defaults_metrics.py \\
                 tests/test_defaults_folds.py tests/test_defaults_nan.py \\
                 --hypothesis-show-statistics

         A failure prints the ``@reproduce_failure`` blob to paste above the test.

The profile is chosen by the environment variable ``HYPOTHESIS_PROFILE`` (``ci`` when unset)
and loaded by ``tests/conftest.py`` before any test module builds its ``settings``, which
take their unset fields from the loaded profile.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILES = ("ci", "long")
LONG_FACTOR = 10
_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def profile() -> str:
    """The profile named by ``HYPOTHESIS_PROFILE`` (``ci`` when unset); an unknown name fails."""
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci") or "ci"
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r} is not a profile: use one of {', '.join(PROFILES)}")
    return name


def load() -> None:
    """Register both profiles and load the one ``HYPOTHESIS_PROFILE`` names."""
    settings.register_profile("ci", derandomize=True, database=None, **_COMMON)
    settings.register_profile("long", derandomize=False, **_COMMON)
    settings.load_profile(profile())


def examples(ci: int) -> int:
    """``max_examples`` for a property: ``ci`` under the ``ci`` profile, ``LONG_FACTOR``
    times as many under ``long``."""
    return ci * LONG_FACTOR if profile() == "long" else ci
