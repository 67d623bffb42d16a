"""Print the README's naive Bayes figures on ../shared/data.

Run from the repository root: ``.venv/bin/python docs/shared_data_figures.py``. It uses
the same code as tests/test_shared_data.py, so the figures and the tests cannot drift.
"""

import sys
import warnings
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
warnings.simplefilter("ignore")

import sqlnb  # noqa: E402
from support import shared_data as sd  # noqa: E402
from test_shared_data import cv_accuracy, scored, source  # noqa: E402

con = duckdb.connect()
model = sqlnb.fit(source(sd.adult_train_query()), "income", con=con)
out = scored(model, sd.adult_test_query(), con, outputs=("prediction",))
err = np.mean([p != t for p, t in zip(out["prediction"], out["income"])])
print(f"adult, every test row, '?' as NULL: error {100 * err:.2f} %")
for name in ("mushroom", "votes"):
    print(f"{name}: 5-fold CV accuracy, '?' as a value {100 * cv_accuracy(name, True):.2f} %, "
          f"'?' as NULL {100 * cv_accuracy(name, False):.2f} %")
