"""What only a generative model can do: update, novelty, sampling, semi-supervised EM.

A naive Bayes model is a joint model ``p(x, c) = π_c · Π_j p(x_j | c)`` kept as its
sufficient statistics (:mod:`sqlnb.stats`). That buys four things a discriminative
classifier cannot offer:

:func:`update`
    New rows are reduced to statistics by the same one-scan aggregation as
    :func:`sqlnb.fit` and merged exactly (counts add, Gaussian moments merge by Chan,
    Golub & LeVeque). The result equals the refit on the union of all batches, whatever
    the batches, including one-row batches and batches that bring a new class,
    category or token; optional exponential forgetting (``decay``).
:func:`novelty_threshold`, :func:`flag_novel`
    ``log_evidence = ln p(x) = ln Σ_c p(x, c)`` is an output of every scoring query. Rows
    the model finds unusually improbable are novel: the threshold is a quantile of the
    training rows' log evidence, computed in SQL and kept in the model's report.
:func:`sample`
    Synthetic rows drawn from the fitted joint distribution.
:func:`fit_em`
    Semi-supervised EM (Nigam, McCallum, Thrun & Mitchell 2000): unlabelled rows enter
    the statistics with their posterior class probabilities as weights.

The package: :mod:`~sqlnb.workflows.generative.updating` (:func:`update`,
:func:`compatible_features`), :mod:`~sqlnb.workflows.generative.novelty`,
:mod:`~sqlnb.workflows.generative.sampling` and :mod:`~sqlnb.workflows.generative.em`,
over the checks they share in :mod:`~sqlnb.workflows.generative.common`.
"""

from sqlnb.workflows.generative.em import fit_em
from sqlnb.workflows.generative.novelty import NOVELTY, flag_novel, novelty_query, novelty_threshold
from sqlnb.workflows.generative.sampling import sample
from sqlnb.workflows.generative.updating import compatible_features, update

__all__ = ["NOVELTY", "compatible_features", "update", "novelty_threshold", "novelty_query", "flag_novel",
           "sample", "fit_em"]
