"""sqlnb: probabilistic classifiers trained and scored inside the database, in SQL."""

from sqlnb.version import __version__  # noqa: E402

from sqlnb.api import MODELS, connect, drop, fit, fit_lda, fit_logistic, fit_qda, load, models  # noqa: E402
from sqlnb.workflows.compare import learning_curves  # noqa: E402
from sqlnb.workflows.cv import cross_validate  # noqa: E402
from sqlnb.models.discriminant import LDA, QDA  # noqa: E402
from sqlnb.errors import SqlnbError  # noqa: E402
from sqlnb.workflows.generative import fit_em, flag_novel, novelty_threshold, sample, update  # noqa: E402
from sqlnb.models.logistic import Logistic  # noqa: E402
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes  # noqa: E402
from sqlnb.source import Files, Query, Table  # noqa: E402
from sqlnb.api import fit_long  # noqa: E402
from sqlnb.models.naive_bayes.text import TextOptions, mutual_information, top_terms  # noqa: E402

__all__ = ["fit", "connect", "fit_lda", "fit_qda", "fit_logistic", "MODELS", "LDA", "QDA", "Logistic",
           "cross_validate", "learning_curves",
           "load", "models", "drop", "SqlnbError", "NaiveBayes", "Hyperparameters",
           "Files", "Query", "Table", "update", "sample", "fit_long", "TextOptions", "mutual_information", "top_terms", "fit_em", "novelty_threshold", "flag_novel",
           "__version__"]
