"""Scores read back from a fixture that another machine computed and stored.

A stored fixture's numbers were computed on the CPU that wrote it. What passes through numpy's
LAPACK (LDA's and QDA's factorisations, logistic regression's solver) or through the C
library's ``exp``/``log`` (which pick FMA or non-FMA code by CPU) may differ in the last bits
on another CPU: LDA's ``jll`` differs by up to 6.7e-16 between the machine that wrote
``format1_models`` and an AMD EPYC. So a fixture's numbers are compared within a tolerance
that holds on any machine, far below any difference a change of the model would make; labels,
ids and every non-number (predictions, sets) are compared exactly.
"""

from __future__ import annotations

import numpy as np

#: Relative and absolute tolerance for a number computed on another CPU.
RTOL = 1e-12
ATOL = 1e-12


def is_number_column(name: str, values: list) -> bool:
    """Whether a stored column holds floating-point numbers (the first non-NULL value is a
    float, or the name is one of the scoring outputs that always are)."""
    first = next((v for v in values if v is not None), None)
    return isinstance(first, (float, np.floating)) or name.startswith(("proba", "log_", "jll", "expected"))


def assert_scores_as_stored(got: dict, want: dict) -> None:
    """``got`` (column -> values, in the stored row order) equals the stored ``want``: the
    same columns in the same order, non-numbers exactly, numbers within RTOL/ATOL (NULLs and
    NaNs where they were)."""
    assert list(got) == list(want)
    for column in want:
        if is_number_column(column, want[column]):
            g = np.array([np.nan if v is None else v for v in got[column]], dtype=float)
            w = np.array([np.nan if v is None else v for v in want[column]], dtype=float)
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=column)
        else:
            assert got[column] == want[column], column
