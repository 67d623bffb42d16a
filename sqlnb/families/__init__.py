"""The distribution families, behind an explicit registry.

The mapping is written out rather than discovered so that a reader sees every family in
one place and adding one has no effect at a distance.
"""

from __future__ import annotations

from .base import Family, Feature, is_float, is_numeric
from .bernoulli import Bernoulli
from .categorical import Categorical
from .complement import Complement
from .gaussian import Gaussian
from .multinomial import Multinomial

REGISTRY: dict[str, Family] = {
    "gaussian": Gaussian(),
    "bernoulli": Bernoulli(),
    "multinomial": Multinomial(),
    "complement": Complement(),
    "categorical": Categorical(),
}

KINDS = tuple(REGISTRY)

__all__ = ["REGISTRY", "KINDS", "Family", "Feature", "is_float", "is_numeric"]
