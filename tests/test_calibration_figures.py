"""The figures of docs/calibration.md: log loss and expected calibration error before and
after calibration on adult and spambase, computed here and compared with the table in the
docs (``SQLNB_DOCS_UPDATE=1`` rewrites the table with what this test computes; review the
diff). Also the bar calibration must clear: temperature calibration fitted on half of adult.test
lowers the log loss and the ECE on the other half.

Splits (deterministic, by file row position ``row_id``):

* adult: fit on adult.data; calibrate on the even rows of adult.test, evaluate on the odd;
* spambase: fit on the ESL training rows; calibrate on the even ESL test rows, evaluate on
  the odd ones.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest
from sklearn.metrics import log_loss

import sqlnb
from sqlnb.models.calibration import METHODS, calibrate
from support import shared_data as sd

DOC = Path(__file__).resolve().parents[1] / "docs" / "calibration.md"
START, END = "<!-- calibration-figures:start -->", "<!-- calibration-figures:end -->"
BINS = 15

pytestmark = [pytest.mark.slow, pytest.mark.shared_data]  # fits on adult: ~110 s under load


def expected_calibration_error(proba: np.ndarray, truth: np.ndarray, bins: int = BINS) -> float:
    """ECE over the top-class probability: ``bins`` equal-width bins of [0, 1] (bin i holds
    confidences in [i/bins, (i+1)/bins), the last one also 1), Σ_b (n_b/N)·|acc_b − conf_b|."""
    conf = proba.max(axis=1)
    correct = proba.argmax(axis=1) == truth
    which = np.minimum((conf * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            total += inside.mean() * abs(correct[inside].mean() - conf[inside].mean())
    return float(total)


def test_expected_calibration_error_by_hand():
    proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.45, 0.55], [1.0, 0.0]])
    truth = np.array([0, 1, 1, 0, 0])
    # bins: 0.9 -> 13, 0.8 -> 12, 0.7 -> 10, 0.55 -> 8, 1.0 -> 14 (the last bin is closed)
    want = (abs(1 - 0.9) + abs(0 - 0.8) + abs(1 - 0.7) + abs(0 - 0.55) + abs(1 - 1.0)) / 5
    assert expected_calibration_error(proba, truth) == pytest.approx(want, abs=1e-15)
    # two rows in one bin: |mean accuracy − mean confidence|
    assert expected_calibration_error(np.array([[0.6, 0.4], [0.61, 0.39]]), np.array([0, 1])) == \
        pytest.approx(abs(0.5 - 0.605), abs=1e-15)


def _query(text: str) -> sqlnb.Query:
    return sqlnb.Query(text)


def _parts(con):
    """(data set, model kind, fitted model, calibration rows, evaluation rows) for the table."""
    adult_test = sd.render(sd.adult_test_query(row_id=True))
    half = 'SELECT * EXCLUDE ("row_id") FROM ({}) WHERE "row_id" % 2 = {}'
    nb = sqlnb.fit(sqlnb.Query(sd.render(sd.adult_train_query())), "income", con=con)
    yield ("adult", "naive Bayes", nb, _query(half.format(adult_test, 0)), _query(half.format(adult_test, 1)))
    spam = sd.render(sd.spambase_query(row_id=True))
    train = _query(f'SELECT * EXCLUDE ("row_id", "is_test") FROM ({spam}) WHERE NOT "is_test"')
    split = 'SELECT * EXCLUDE ("row_id", "is_test") FROM ({}) WHERE "is_test" AND "row_id" % 2 = {}'
    cal_rows, eval_rows = _query(split.format(spam, 0)), _query(split.format(spam, 1))
    yield "spambase", "naive Bayes", sqlnb.fit(train, "spam", con=con), cal_rows, eval_rows
    yield ("spambase", "logistic", sqlnb.fit(train, "spam", con=con, model="logistic", standardize=True),
           cal_rows, eval_rows)


def _measure(model, rows, con) -> tuple[float, float, float, int]:
    t = model.score(rows, con=con, outputs=("proba",), keep=[model.label]).to_arrow_table().to_pydict()
    proba = np.array([t[c] for c in model.proba_columns()], dtype=float).T
    truth = np.array([model.classes.index(v) for v in t[model.label]])
    return (log_loss(truth, proba, labels=range(len(model.classes))), expected_calibration_error(proba, truth),
            float(np.mean(proba.argmax(axis=1) != truth)), len(truth))


def figures() -> tuple[str, dict]:
    """The docs table (markdown) and the figures by (data set, model, method)."""
    con = duckdb.connect()
    lines = ["| data set | model | rows: calibrate / evaluate | calibration | fitted | log loss | ECE (15 bins) "
             "| error |", "|---|---|---|---|---|---:|---:|---:|"]
    found = {}
    for name, kind, model, cal_rows, eval_rows in _parts(con):
        for method in (None, *METHODS):
            m = model if method is None else calibrate(model, cal_rows, method, con=con)
            found[(name, kind, method)] = (*_measure(m, eval_rows, con), m.calibration)
        n_cal = found[(name, kind, METHODS[0])][-1].rows
        for method in (None, *METHODS):
            loss, ece, err, n, c = found[(name, kind, method)]
            fitted = ("" if c is None else f"T = {c.temperature:.4f}" if method == "temperature"
                      else f"A = {c.slope:.4f}, B = {c.intercept:.4f}" if method == "platt"
                      else f"{len(c.venn_abers.steps[0].thresholds):,} distinct scores" if method == "venn-abers"
                      else f"{len(c.thresholds)} thresholds")
            lines.append(f"| {name} | {kind} | {n_cal:,} / {n:,} | {method or 'none'} | {fitted} | {loss:.4f} | "
                         f"{ece:.4f} | {100 * err:.2f} % |")
    return "\n".join(lines), found


@pytest.fixture(scope="module")
def computed():
    sd.require_shared_data("adult", "spambase")
    return figures()


def test_temperature_lowers_log_loss_and_ece_on_adult(computed):
    _, found = computed
    loss0, ece0, _, n, _ = found[("adult", "naive Bayes", None)]
    loss1, ece1, _, n1, cal = found[("adult", "naive Bayes", "temperature")]
    assert n == n1 == 16281 // 2  # the odd rows of adult.test
    assert cal.rows == 16281 - n  # fitted on the even ones
    assert loss1 < loss0 and ece1 < ece0, (loss0, loss1, ece0, ece1)


def test_docs_show_these_figures(computed):
    table, _ = computed
    text = DOC.read_text()
    shown = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    assert shown, f"{DOC.name} has no {START} ... {END} block"
    if os.environ.get("SQLNB_DOCS_UPDATE"):
        DOC.write_text(text.replace(shown.group(1), table))
        return
    assert shown.group(1) == table, f"the figures in {DOC.name} differ from what this test computes:\n{table}"
