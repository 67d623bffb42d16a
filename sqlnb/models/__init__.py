"""Model kinds: sufficient statistics or fitted parameters -> one SQL score per class.

Every kind is a :class:`~sqlnb.models.base.Model`: it provides one expression per class
(its joint log-likelihood, up to a per-row constant), and the shared finish
(:mod:`sqlnb.models.finish`) turns those into the log-sum-exp, probabilities and argmax.

* :mod:`sqlnb.models.naive_bayes` — naive Bayes of every family, from statistics tables;
* :mod:`sqlnb.models.dense` — what LDA, QDA and logistic regression share (a dense vector);
* :mod:`sqlnb.models.discriminant` — LDA and QDA;
* :mod:`sqlnb.models.logistic` — multinomial logistic regression.

Each kind registers itself with :func:`sqlnb.store.register_kind`, so stored models load
without the store importing any model class.
"""

from sqlnb.models.base import Model
from sqlnb.models.discriminant import LDA, QDA
from sqlnb.models.logistic import Logistic
from sqlnb.models.naive_bayes import Hyperparameters, NaiveBayes

__all__ = ["Model", "NaiveBayes", "Hyperparameters", "LDA", "QDA", "Logistic"]
