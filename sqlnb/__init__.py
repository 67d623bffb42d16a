"""sqlnb: probabilistic classifiers trained and scored inside the database, in SQL."""

__version__ = "0.1.0"

from .api import drop, fit, load, models  # noqa: E402
from .errors import SqlnbError  # noqa: E402
from .naive_bayes import Hyperparameters, NaiveBayes  # noqa: E402
from .source import Files, Query, Table  # noqa: E402

__all__ = ["fit", "load", "models", "drop", "SqlnbError", "NaiveBayes", "Hyperparameters",
           "Files", "Query", "Table", "__version__"]
