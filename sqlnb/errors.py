"""User-facing errors.

Every error a user can cause (a missing column, a label with one class, NaN in a
feature, ...) is a :class:`SqlnbError` whose message is one line naming the table,
column or value at fault and how to fix it. The CLI prints it as ``Error: <message>``
and exits non-zero; nothing is written when one is raised.
"""

from __future__ import annotations

import difflib
import os
import shlex
import sys
import warnings
from typing import Iterable


class SqlnbError(Exception):
    """A problem with the user's input, described in one line."""

    exit_code = 2


class StoreBusy(SqlnbError):
    """Another process kept the model store (a DuckDB file, a PostgreSQL store's lock, a
    Spark warehouse) or the model being changed for longer than this command waits
    (``--wait``). Nothing was written; the same command run later can succeed, so the
    command line exits with 75 (``EX_TEMPFAIL`` of BSD's sysexits.h, the code schedulers
    and mail systems read as "try again later"), not with 2 (bad input)."""

    exit_code = 75


class SqlnbNotFound(SqlnbError):
    """A file, table, model or column that does not exist."""


class ScreeningWarning(UserWarning):
    """A column left out of an automatic feature plan (an ID, a constant, a near-unique
    category); the message says which and how to keep it. The command line prints these
    (and their subclasses) as ``note:`` lines on stderr."""


class VarianceFloorWarning(ScreeningWarning):
    """A Gaussian column whose variance lifts the variance floor (var_smoothing × the
    largest variance) above other columns' own variances; the message names it and how
    to leave it out."""


class UpdateWarning(ScreeningWarning):
    """Something stored with a model that an update could not keep as it was (a decision
    rule made for fewer classes, a calibrator or novelty threshold fitted on the old
    parameters); the message says what changed and how to set it again. A subclass of
    :class:`ScreeningWarning`, so the CLI prints it on stderr the same way."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue a warning attributed to the first caller outside sqlnb: the user's line that
    called ``sqlnb.fit`` (or ``update``, ``score``, an estimator's ``fit``), whatever the
    calls inside the package in between (a fixed ``stacklevel`` pointed at sqlnb's own
    wrappers, e.g. ``sqlnb/sql/build.py``). The command line prints these as ``note:``
    lines either way."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def cli_name(name: str) -> str:
    """A column name as the command line's column lists take it (in double quotes when it
    holds a comma or spaces at either end)."""
    if "," in name or name != name.strip() or name.startswith('"'):
        return '"' + name.replace('"', '""') + '"'
    return name


def shell_word(name: str, suffix: str = "") -> str:
    """A column name (and ``suffix``, e.g. ``=categorical``) as one word of a command a
    hint shows: :func:`cli_name`, quoted for the shell when it needs it, so that
    ``--exclude 'x y'`` pastes as one argument."""
    return shlex.quote(cli_name(name) + suffix)


def suggest(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or an empty string."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), choices, n=3, cutoff=0.5)
    if not close:
        lowered = {c.lower(): c for c in choices}
        if str(name).lower() in lowered:
            close = [lowered[str(name).lower()]]
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


class HeaderWarning(ScreeningWarning):
    """The first line of a CSV file was read as its header although it looks like a row
    of data (:func:`sqlnb.source.header_looks_like_data`); the message says why and how to
    read it as a row. A subclass of :class:`ScreeningWarning`, so the CLI prints it on
    stderr the same way."""
