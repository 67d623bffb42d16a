"""What engine tests do when an engine cannot start."""

from __future__ import annotations

import os

import pytest

#: On CI (``CI`` set) a missing engine fails the run, so a broken install cannot pass as green.
ON_CI = bool(os.environ.get("CI"))


def unavailable(what: str, err: BaseException):
    """Skip the test, saying why (``what`` is not available: ``err``); fail it on CI."""
    msg = f"{what} is not available: {err}"
    if ON_CI:
        pytest.fail(f"{msg} (CI is set: engine tests must run, not skip)", pytrace=False)
    pytest.skip(msg)
