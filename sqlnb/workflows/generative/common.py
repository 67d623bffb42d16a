"""Checks and helpers shared by update, novelty, sampling and EM."""

from __future__ import annotations

from typing import Any, Sequence

from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import eskdb
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.stats import Statistics


# -- shared checks ------------------------------------------------------------------------
def _require_naive_bayes(model: Any, what: str) -> NaiveBayes:
    if not isinstance(model, NaiveBayes):
        kind = getattr(model, "kind", type(model).__name__)
        raise SqlnbError(f"{what} needs a naive Bayes model, not a {kind!r} model")
    return model


def _require_joint(model: NaiveBayes, what: str) -> None:
    """Naive Bayes with learnt weights (:mod:`sqlnb.models.naive_bayes.weighted`) scores
    classes, not a joint probability of the row: nothing to sample from, no likelihood
    to threshold."""
    if not model.generative:
        raise SqlnbError(f"{what} needs the joint probability p(x, class) of a generative model; the learnt weights of "
                         f"model {model.kind!r} make its scores class scores, not a likelihood: use the naive Bayes "
                         "model of the same data (fit without --kind weighted)")


def _require_evidence(model: NaiveBayes, what: str) -> None:
    """``log_evidence`` is ln p(x) under every structure but an ensemble of selective KDBs
    (:mod:`~sqlnb.models.naive_bayes.eskdb`), whose class scores are the log of its
    members' mean posterior p(class | x): their log-sum-exp is 0 on every row, and a
    threshold on it would flag rows by rounding."""
    structure = model.hyper.structure
    if eskdb.ensemble(structure):
        raise SqlnbError(f"{what} needs ln p(x), the model's evidence; structure {structure!r} averages its members' "
                         "posteriors p(class | x), so its log_evidence is 0 on every row: use one structure of the "
                         "same counts, model.with_params(structure='skdb') (or fit --structure skdb)")


def _require_likelihood(features: Sequence[Feature], what: str) -> None:
    """Complement naive Bayes scores are weights, not log-likelihoods: ``log_evidence``
    and an EM objective are meaningless for them."""
    comp = [f.name for f in features if f.kind == "complement"]
    if comp:
        raise SqlnbError(
            f"{what} needs a likelihood, but feature {comp[0]!r} is complement naive Bayes, whose "
            "score is not one; refit with kind multinomial for those columns"
        )


def _with_report(model: NaiveBayes, report: dict, stats: Statistics | None = None) -> NaiveBayes:
    out = model.rebuilt(stats=stats, report=report)  # of the model's kind (weights kept, :mod:`~sqlnb.models.naive_bayes.weighted`)
    if stats is None:  # the same scores (a novelty threshold): a calibrator still applies
        out.calibration = model.calibration
        out.conformal = model.conformal
    return out
