"""sqlnb: probabilistic classifiers trained and scored inside the database, in SQL.

The public names, in the order of the data flow: sources, fitting, model kinds, stored
models, and what is built on fitted models. The layout behind them is in the README's
"How it works".
"""

from sqlnb.version import __version__
from sqlnb.errors import SqlnbError
from sqlnb.source import Files, Query, Table
from sqlnb.api import MODELS, connect, drop, fit, fit_lda, fit_logistic, fit_long, fit_qda, load, models
from sqlnb.models import LDA, QDA, Hyperparameters, Logistic, NaiveBayes
from sqlnb.models.naive_bayes.text import TextOptions, mutual_information, top_terms
from sqlnb.workflows import compare, export  # noqa: F401 (``sqlnb.compare``, ``sqlnb.export`` as the docs use them)
from sqlnb.workflows.compare import learning_curves
from sqlnb.workflows.cv import cross_validate
from sqlnb.workflows.generative import fit_em, flag_novel, novelty_threshold, sample, update

__all__ = ["__version__", "SqlnbError", "Files", "Query", "Table",
           "fit", "fit_lda", "fit_qda", "fit_logistic", "fit_long", "connect", "MODELS",
           "NaiveBayes", "Hyperparameters", "LDA", "QDA", "Logistic", "TextOptions",
           "load", "models", "drop",
           "cross_validate", "learning_curves", "mutual_information", "top_terms",
           "update", "sample", "fit_em", "novelty_threshold", "flag_novel"]
