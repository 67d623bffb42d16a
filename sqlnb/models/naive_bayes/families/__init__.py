"""The distribution families, behind an explicit registry.

The mapping is written out rather than discovered so that a reader sees every family in
one place and adding one has no effect at a distance.
"""

from __future__ import annotations

from sqlnb.models.naive_bayes.families.base import Family, Feature, is_float, is_numeric
from sqlnb.models.naive_bayes.families.bernoulli import Bernoulli
from sqlnb.models.naive_bayes.families.binned import Binned
from sqlnb.models.naive_bayes.families.categorical import Categorical
from sqlnb.models.naive_bayes.families.complement import Complement
from sqlnb.models.naive_bayes.families.gaussian import Gaussian
from sqlnb.models.naive_bayes.families.multinomial import Multinomial

REGISTRY: dict[str, Family] = {
    "gaussian": Gaussian(),
    "bernoulli": Bernoulli(),
    "multinomial": Multinomial(),
    "complement": Complement(),
    "categorical": Categorical(),
    "binned": Binned(),
}

KINDS = tuple(REGISTRY)

__all__ = ["REGISTRY", "KINDS", "Family", "Feature", "is_float", "is_numeric"]
