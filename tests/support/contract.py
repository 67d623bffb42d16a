"""The command line's contract (docs/cli.md, "What scripts can rely on"), checked on one
in-process run: no traceback, an exit code of the documented table, at most one ``Error:``
line, and a failure that is exactly that one line with nothing on stdout."""

from __future__ import annotations

import sys
import traceback
import warnings

from click.testing import CliRunner, Result

from sqlnb.cli import cli


def check(result: Result, argv: list[str]) -> None:
    """Fail with the traceback, or the exit code and output, of a run that breaks the contract."""
    shown = f"sqlnb {argv!r}\nexit {result.exit_code}\nstdout {result.stdout[-2000:]!r}\nstderr {result.stderr!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError("traceback:\n" + "".join(traceback.format_exception(*result.exc_info)) + shown)
    # docs/cli.md's table: 0 success, 1 a check that failed (evaluate --min-accuracy only),
    # 2 bad input (130 and 143, interrupted and terminated, are not drawn here).
    allowed = {0, 2} | ({1} if argv[0] == "evaluate" and "--min-accuracy" in argv else set())
    assert result.exit_code in allowed, shown
    assert "Traceback" not in result.output, shown
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) <= 1, shown
    if result.exit_code == 2:
        assert result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1, shown
        assert result.stdout == "", shown


def run(*argv) -> Result:
    """``sqlnb ARGV`` in-process, exceptions caught (so a traceback is seen, not raised),
    checked by :func:`check`."""
    argv = [str(a) for a in argv]
    with warnings.catch_warnings():
        # As in a real process: a warning nobody turned into a note is printed on stderr
        # (pytest would otherwise record it out of sight).
        warnings.simplefilter("always")
        warnings.showwarning = _show
        result = CliRunner().invoke(cli, argv, catch_exceptions=True)
    check(result, argv)
    return result


def _show(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
