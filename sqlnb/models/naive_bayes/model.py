"""Naive Bayes: sufficient statistics + hyperparameters -> per-class SQL scores.

The model is its :class:`~sqlnb.stats.Statistics`. Log-probabilities are derived from
them when needed, under :class:`Hyperparameters`, so changing α, the estimator, the
class prior or the variance floor (:meth:`NaiveBayes.with_params`), merging new rows
(:meth:`NaiveBayes.merge`) or scoring never reads the training data again.

Class prior (``class_prior``)::

    fitted     ln N_c − ln Σ N                    (−inf for a class with no rows)
    uniform    −ln K
    {c: p}     ln p_c                              given (or a sequence in class order);
                                                   checked and copied at fit
    dirichlet  ln (N_c + a_c) − ln (N + Σ a_c)     a_c = prior_alpha (one number, or one
                                                   α_c per class) under the estimator:
                                                   α_c (posterior mean), α_c − 1 (MAP), 0 (MLE)

The prior enters every class score once — unless every feature is ``complement``,
whose score has no prior term (as in scikit-learn's ComplementNB).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError, suggest
from sqlnb.models.naive_bayes.families import KINDS, REGISTRY, Feature, is_float, is_numeric
from sqlnb.models.naive_bayes.families.categorical import EXPORT_MAX, INLINE_MAX
from sqlnb.models.base import Model
from sqlnb.models.explain import FeatureTerms
from sqlnb.models.finish import COUNTS_COLUMN, ClassScore, shares_subexpressions
from sqlnb.models.priors import class_alphas, own_prior
from sqlnb.models.naive_bayes import aode, eskdb, kdb, listed, mixture, skdb, tan, text, wide
from sqlnb.models.naive_bayes.binning import cut_counts_from_table, cut_counts_table
from sqlnb.models.naive_bayes.hyperparameters import Hyperparameters
from sqlnb.source import EngineTypes
from sqlnb.stats import Bag, Counts, Moments, Statistics, Sums
from sqlnb.store import register_kind
from sqlnb.engines.duckdb import new_connection

#: Count columns (multinomial, complement) from which DuckDB's scoring SELECT writes their
#: class terms as one ``list_dot_product`` per class over one list of the row's values,
#: instead of a term per column and class. The terms are the same products (summed in
#: another association, so a score can differ in its last bits); the tree is a fraction of
#: the size, so building, rendering, binding and DuckDB's common-subexpression pass take a
#: fraction of the time (digits, 64 columns x 10 classes, benchmarks/README.md).
DOT_MIN = 8

def _unguarded(f: Feature) -> bool:
    """Whether the feature's score term can drop its NaN guard: Gaussian terms are pure
    arithmetic, so a NaN input propagates to the class score (where scoring detects it)."""
    return f.kind == "gaussian" and f.bag is None


class NaiveBayes(Model):
    """A naive Bayes classifier whose features may mix families column by column.

    Build one with :func:`sqlnb.fit`; load a saved one with :func:`sqlnb.load`.

    Attributes
    ----------
    stats : Statistics
        The sufficient statistics (the model's whole memory of the data).
    hyper : Hyperparameters
        How log-probabilities are derived from ``stats``.
    features : list of Feature
        Feature columns with their family and SQL type.
    """

    kind = "naive_bayes"
    #: Its scores are joint log-probabilities ln p(x, class): what sampling and novelty need.
    generative = True

    def __init__(self, label: str, label_type: str, features: Sequence[Feature], stats: Statistics,
                 hyper: Hyperparameters | None = None, report: dict | None = None, weight: str | None = None):
        self.label = label
        self.label_type = label_type
        self.features = list(features)
        self.stats = stats
        self.hyper = self._bound(hyper or Hyperparameters())
        self.report = dict(report or {})
        self.weight = weight
        self._params: dict | None = None
        self._tree: tan.Tree | kdb.Network | skdb.Deep | None = None
        self._aode: aode.Aode | None = None
        self._mix: mixture.Mixture | None = None  # an average of structures
        self._ens: eskdb.Ensemble | None = None  # an ensemble of skdb members
        self._plan: listed.Plan | None = None  # DuckDB's tables of the tree structures
        # Derive the log-parameters now: a setting these statistics cannot take (a zero variance with
        # var_smoothing 0, MAP with alpha < 1 on a zero count) fails at fit, not at first use.
        self.log_parameters()

    def _bound(self, hyper: Hyperparameters) -> Hyperparameters:
        """``hyper`` checked against this model: every ``feature_alpha`` key names a
        discrete feature, and a given class prior becomes a validated mapping class -> p."""
        kinds = {f.name: f.kind for f in self.features}
        for name in hyper.feature_alpha:
            if name not in kinds:
                raise SqlnbError(f"feature_alpha (--feature-alpha) names {name!r}, which is not a feature of this "
                                 f"model{suggest(name, kinds)}")
            if kinds[name] == "gaussian":
                raise SqlnbError(f"feature_alpha (--feature-alpha) gives {name!r} a pseudo-count, but it is a "
                                 "gaussian feature, which has none; name only categorical, bernoulli, "
                                 "multinomial or complement features")
        if isinstance(hyper.prior_alpha, Mapping):  # labels checked; the model's own mapping class -> α_c
            hyper = replace(hyper, prior_alpha=dict(zip(self.classes,
                                                        class_alphas(hyper.prior_alpha, self.classes).tolist())))
        if isinstance(hyper.class_prior, str):
            return hyper
        return replace(hyper, class_prior=own_prior(hyper.class_prior, self.classes))

    @property
    def classes(self) -> list:
        return self.stats.classes

    @property
    def feature_names(self) -> list[str]:
        return [f.name for f in self.features]

    def numeric_features(self) -> list[str]:
        return [f.name for f in self.features if f.kind != "categorical" and f.bag is None]

    def __repr__(self) -> str:
        kinds = [f.kind for f in self.features]
        fams = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))  # in order of first use
        return (f"NaiveBayes(label={self.label!r}, classes={self.classes!r}, features=[{fams}], "
                f"rows={self.stats.n_rows}, estimator={self.hyper.estimator!r}, alpha={self.hyper.alpha!r})")

    # -- estimation -------------------------------------------------------------------
    def rebuilt(self, features: Sequence[Feature] | None = None, stats: Statistics | None = None,
                report: dict | None = None) -> "NaiveBayes":
        """A model of this kind and hyperparameters over other ``features`` (an update's new
        cut points), ``stats`` or ``report`` (each default: this model's), what a workflow
        that changes the statistics returns (update, EM, a novelty threshold)."""
        return NaiveBayes(self.label, self.label_type, self.features if features is None else features,
                          self.stats if stats is None else stats, self.hyper,
                          self.report if report is None else report, self.weight)

    def with_params(self, **changes) -> "NaiveBayes":
        """The same statistics under other hyperparameters (no data is read).

        Accepts the fields of :class:`Hyperparameters` (``alpha``, ``estimator``,
        ``class_prior``, ``var_smoothing``, ...).
        """
        return NaiveBayes(self.label, self.label_type, self.features, self.stats,
                          self.hyper.changed(**changes), self.report, self.weight)

    def select(self, names: Sequence[str]) -> "NaiveBayes":
        """The model a fit on the features ``names`` alone would give, from these statistics
        (no data is read): the statistics restricted to those features, log-parameters
        derived afresh. Derived parameters can depend on the other features (a Gaussian
        variance floor is a fraction of the largest variance among the model's Gaussian
        features; a multinomial class total sums every count column), so this is not
        the full model with terms left out. Features keep this model's order; per-feature
        α of features left out is dropped. A model without features is its class prior.
        """
        index = {f.name: f for f in self.features}
        for name in names:
            if name not in index:
                raise SqlnbError(f"{name!r} is not a feature of this model{suggest(name, index)}; "
                                 f"its features are: {', '.join(index)}")
        keep = set(names)
        features = [f for f in self.features if f.name in keep]
        stats = replace(self.stats, features={f.name: self.stats.features[f.name] for f in features},
                        pairs=None if self.stats.pairs is None else self.stats.pairs.restricted(keep))
        hyper = replace(self.hyper, feature_alpha={k: v for k, v in self.hyper.feature_alpha.items() if k in keep})
        return NaiveBayes(self.label, self.label_type, features, stats, hyper, self.report, self.weight)

    def class_log_prior(self) -> np.ndarray:
        """ln π_c under ``hyper.class_prior`` (:meth:`Hyperparameters.class_log_prior`)."""
        return self.hyper.class_log_prior(self.stats.class_n, self.classes)

    def log_parameters(self) -> dict:
        """Per-family derived parameters: ``{"prior": ..., "<feature>": ...}``."""
        if self._params is None:
            params: dict[str, Any] = {"prior": self.class_log_prior()}
            for kind in KINDS:
                group = [f for f in self.features if f.kind == kind]
                if group:
                    params.update(REGISTRY[kind].estimate(group, self.stats.features, self.stats.class_n, self.hyper))
                    for f in group:  # token bags: per-term weight rows (sqlnb.models.naive_bayes.text)
                        if f.bag is not None:
                            params[f.name] = text.prepare(f, params[f.name], self.stats.features[f.name])
            if eskdb.ensemble(self.hyper.structure):  # skdb members' mean posterior (naive_bayes.eskdb)
                self._ens = eskdb.derive(self.features, self.stats, self.hyper, params,
                                         eskdb.order_of(self.hyper.structure))
            elif mixture.members(self.hyper.structure):  # tan+kdb:2+aode (sqlnb.models.naive_bayes.mixture)
                self._mix = mixture.derive(self.features, self.stats, self.hyper, params)
            elif self.hyper.structure == "tan":
                self._tree = tan.derive(self.features, self.stats, self.hyper, params)
            elif kdb.order_of(self.hyper.structure):  # k-dependence (sqlnb.models.naive_bayes.kdb)
                self._tree = (skdb if skdb.deep(self.hyper.structure) else kdb).derive(  # deeper: skdb
                    self.features, self.stats, self.hyper, params, kdb.order_of(self.hyper.structure))
            elif self.hyper.structure == "aode":
                self._aode = aode.derive(self.features, self.stats, self.hyper, params)
            self._params = params
        return self._params

    def tree(self) -> dict[str, str]:
        """Each tree feature's parent, the tuple of them when several (``{}`` for naive Bayes)."""
        self.log_parameters()
        return dict(self._tree.parent) if self._tree is not None else {}

    def aode_summary(self) -> dict:
        """AODE's super-parents: per discrete feature its number of values and how many of them may be a
        super-parent at this ``aode_min_count``, and the per-class shift (:func:`aode.describe`); else ``{}``."""
        self.log_parameters()
        return {} if self._aode is None else aode.describe(self._aode, self.stats, self.hyper.aode_min_count)

    def skdb_summary(self) -> dict:
        """``skdb``'s leave-one-out table and choice (:func:`skdb.leave_one_out`); ``{}`` otherwise."""
        self.log_parameters()
        return dict(getattr(self._tree, "choice", None) or {})

    def eskdb_summary(self) -> dict:
        """``eskdb``'s members: rankings, parents, k, s, m's (:func:`eskdb.describe`); ``{}`` otherwise."""
        self.log_parameters()
        return {} if self._ens is None else eskdb.describe(self._ens, eskdb.order_of(self.hyper.structure))

    def average_summary(self) -> dict:
        """An average of structures: its members and each tree member's parents
        (:func:`mixture.describe`); ``{}`` for other structures."""
        self.log_parameters()
        return {} if self._mix is None else mixture.describe(self._mix)

    def tree_conditionals(self) -> dict[str, dict]:
        """Each tree child's table ln p(child value | class, parent value) (tree-augmented
        models; ``{}`` for naive Bayes): ``{child: {"parent", "parent_values", "values",
        "log_proba"}}``, ``log_proba`` of shape (classes, parent values, child values), the
        values as stored (categories, bin numbers, ``False``/``True`` for Bernoulli)."""
        self.log_parameters()
        if self._tree is None:
            return {}
        if isinstance(self._tree, (kdb.Network, skdb.Deep)):
            return self._terms_module().conditionals(self._tree, self.stats)
        by_name = {f.name: f for f in self._tree.features}
        return {child: {"parent": parent,
                        "parent_values": tan.feature_values(by_name[parent], self.stats.features),
                        "values": tan.feature_values(by_name[child], self.stats.features),
                        "log_proba": self._tree.cpt[child]}
                for child, parent in self._tree.parent.items()}

    def _scoring_features(self, input_types: Mapping[str, str] | None) -> list[Feature]:
        """The features as the scored source holds them. A numeric family reads its column
        as DOUBLE whatever the fitted integer or decimal type was, so it takes the input's
        type: then NaN in a column fitted as BIGINT (a CSV's ``nan``) is missing like any
        NaN. Given the running engine's own types (:class:`~sqlnb.source.EngineTypes`), a
        DOUBLE column is read without a cast (``Feature.source_type``); SQL exported to
        another dialect keeps its casts. Categorical columns keep the fitted type: their
        values are cast to it."""
        if not input_types:
            return list(self.features)
        exact = isinstance(input_types, EngineTypes)
        out = []
        for f in self.features:
            t = input_types.get(f.name)
            numeric = f.kind in ("gaussian", "bernoulli", "multinomial", "complement", "binned") and f.bag is None
            if numeric and t is not None and (is_numeric(t) or t.upper() == "BOOLEAN"):
                f = replace(f, sql_type=t, source_type=exact)
            out.append(f)
        return out

    def check_dialect(self, dialect: str) -> None:
        bags = [f.name for f in self.features if f.bag is not None]
        if bags and dialect != "duckdb":
            raise SqlnbError(
                f"token bag column {bags[0]!r} is scored with DuckDB's regexp_extract_all, lists and "
                f"maps, which {dialect} lacks; score this model in DuckDB, or fit one without the "
                "text column to export it")
        if dialect != "duckdb":
            for f in self.features:
                n = len(self.log_parameters()[f.name][0]) if self._lookup(f, dialect) else 0
                if n > EXPORT_MAX:
                    raise SqlnbError(
                        f"categorical column {f.name!r} has {n:,} training values; SQL for {dialect} lists "
                        f"each one (a VALUES join), which takes minutes past {EXPORT_MAX:,}: score in DuckDB "
                        "(its lookup is packed), or fit the column with fewer values (group the rare ones)")

    def fast_class_scores(self, input_types=None, dialect=None):
        """Class scores whose Gaussian terms skip the per-term NaN guard (see
        :meth:`Model.fast_class_scores`); None when no Gaussian column could hold NaN, and
        for Spark, whose Gaussian terms catch NaN in one copy (``Gaussian.term``)."""
        if shares_subexpressions(dialect):
            return None
        features = self._scoring_features(input_types)
        wide_gauss = {f.name for f in self._wide(features, dialect)[0]}  # their lambdas read NaN as missing
        if not any(_unguarded(f) and is_float(f.sql_type) and f.name not in wide_gauss for f in features):
            return None
        return self.class_terms(input_types, dialect, nan_guard=False)

    def uses_prior(self) -> bool:
        # Complement features carry no prior (ComplementNB); a model without features is
        # its prior alone (what feature selection starts from).
        return len(self.classes) == 1 or not self.features or any(f.kind != "complement" for f in self.features)

    def _lookup(self, f: Feature, dialect: str | None) -> str | None:
        """How a categorical ``f`` finds its log-probabilities: ``"in place"`` (DuckDB, no
        join, so the rows keep their order: :meth:`Categorical.in_place_term`), ``"packed"``
        (DuckDB, a vocabulary past ``INLINE_MAX``: a join that does not inline one literal
        per value, :meth:`Categorical.packed_join`), ``"values"`` (other dialects: a
        ``VALUES`` join); None for other features."""
        if f.kind != "categorical" or f.bag is not None:
            return None
        if dialect != "duckdb":
            return "values"
        return "packed" if len(self.log_parameters()[f.name][0]) > INLINE_MAX else "in place"

    def score_joins(self, dialect=None, input_types=None, packed: bool = False):
        """See :meth:`Model.score_joins`; ``packed`` as for :meth:`class_terms`."""
        params = self.log_parameters()
        joins = []
        for f in self.features:
            how = self._lookup(f, dialect)
            how = "packed" if packed and how is not None else how
            if how == "in place":
                continue
            fam = text.family_for(f)
            if how == "packed":
                j = fam.packed_join(f, params[f.name], (input_types or {}).get(f.name))
            else:
                join = getattr(fam, "join", None)
                j = join(f, params[f.name]) if join is not None else None
            if j is not None:
                joins.append(j)
        return joins

    def _dotted(self, features: Sequence[Feature], dialect: str | None, dot: bool | None = None) -> list[Feature]:
        """The count features (multinomial, complement) whose class terms are one dot product
        per class over a list of their values (:meth:`score_prelude`): in DuckDB (or where
        ``dot`` says so), from :data:`DOT_MIN` such columns on, when every weight is finite
        (an infinite one needs its ``x > 0`` test,
        :func:`~sqlnb.models.naive_bayes.families.base.times`)."""
        if not (dialect == "duckdb" if dot is None else dot):
            return []
        params = self.log_parameters()
        dotted = [f for f in features if f.kind in ("multinomial", "complement") and f.bag is None
                  and np.all(np.isfinite(np.asarray(params[f.name], dtype=float)))]
        return dotted if len(dotted) >= DOT_MIN else []

    def _wide(self, features: Sequence[Feature], dialect: str | None, dot: bool | None = None):
        """The Gaussian and Bernoulli features scored as dot products over lists
        (:mod:`~sqlnb.models.naive_bayes.wide`): in DuckDB (or where ``dot`` says so)."""
        if not (dialect == "duckdb" if dot is None else dot):
            return [], []
        params = self.log_parameters()
        if self._tree is not None:  # a tree child's term is conditioned on its parent (tan); skdb drops some
            features = [f for f in features if f.name not in {*self._tree.parent, *getattr(self._tree, "dropped", ())}]
        return wide.wide_features(features, params, "gaussian"), wide.wide_features(features, params, "bernoulli")

    def _listed(self) -> listed.Plan | None:
        """Where DuckDB reads a tree's or an average's tables from (:func:`listed.plan`); None for NB, AODE."""
        self._plan = self._plan or listed.plan(self._tree, self._mix, self.hyper.structure, self.features,
                                               self.stats, self.log_parameters())
        return self._plan

    def score_prelude(self, input_types=None, dialect=None, dot: bool | None = None):
        features = self._scoring_features(input_types)
        out = wide.prelude(*self._wide(features, dialect, dot), self.log_parameters())
        dotted = self._dotted(features, dialect, dot)
        if dialect == "duckdb" and self._ens is not None:  # an ensemble's members, each one sum per class
            out += eskdb.prelude(self._ens, features, self.stats, input_types)
        elif dialect == "duckdb":  # structures: each position once per row, per class the tables once
            plan = self._listed()
            out += listed.prelude(plan, self._mix, features, self.stats, input_types) if plan else []
            net = self._aode or (dict(self._mix.nets).get("aode") if self._mix is not None else None)
            out += aode.prelude(net, features, self.stats, dialect, input_types) if net is not None else []
            out += aode.naive_prelude(self._aode, self.log_parameters()) if self._aode is not None else []
        if dotted:
            # A missing (NULL or NaN) count contributes nothing: 0 in the list, as COALESCE(x·w, 0).
            values = [exp.Coalesce(this=text.family_for(f).value(f, scoring=True), expressions=[sql.dbl(0.0)])
                      for f in dotted]
            out.append((COUNTS_COLUMN, exp.Array(expressions=values)))
        return out

    def class_terms(self, input_types=None, dialect=None, nan_guard: bool = True, dot: bool | None = None,
                    tree_dialect: str | None = None, tree_positions: Mapping[str, exp.Expression] | None = None,
                    packed: bool = False):
        """See :meth:`Model.class_terms`. ``tree_dialect`` (default ``dialect``) is the
        dialect a tree child's term is written for (:func:`tan.child_terms`): the pooled
        cross-validation query keeps the portable lookups (``dialect`` None) but reads the
        tree's conditional tables as DuckDB lists there, not as one CASE branch per cell;
        ``tree_positions`` are the expressions those terms read the tree features' value
        positions from (default :meth:`tree_positions`). ``packed`` (DuckDB; give
        :meth:`score_joins` the same): every categorical column is looked up through
        :meth:`Categorical.packed_join <sqlnb.models.naive_bayes.families.categorical.Categorical.packed_join>`
        whatever the size of its vocabulary, so that fold models of differing vocabularies
        join alike in the pooled cross-validation query. ``dot`` False: one term per feature."""
        params = self.log_parameters()
        features = self._scoring_features(input_types)
        if self._ens is not None:  # the members' raw scores, which combiner()'s stages average
            return eskdb.member_scores(self._ens, features, self.stats, params, dialect, input_types,
                                       self.uses_prior())
        dotted = self._dotted(features, dialect, dot)
        prelude = tree_positions is None and dialect == "duckdb"  # read from score_prelude's columns
        tree = {} if self._tree is None or (prelude and self._listed()) else self._terms_module().child_terms(
            self._tree, features, self.stats, params, tree_dialect or dialect, input_types, tree_positions)
        covered, direct = set(), []  # features whose terms are summed in one term per class, that term
        if prelude and self._listed() is not None:  # a tree's or an average's terms read from the lists
            tree, covered, direct, averaged = listed.terms(self._listed(), self._mix, len(self.classes), dot is False)
        elif self._mix is not None:  # an average of structures: one term, each member's read positions its own
            averaged = mixture.terms(self._mix, features, self.stats, params, tree_dialect or dialect, input_types)
        elif self._aode is not None and prelude:
            averaged = aode.padded_terms(self._aode)
            tree, covered, direct = aode.naive_read(self._aode, params, len(self.classes))
        else:
            averaged = [] if self._aode is None else aode.terms(self._aode, features, self.stats,
                                                                 tree_dialect or dialect, input_types, tree_positions)
        gauss, bern = self._wide(features, dialect, dot)
        skip = {f.name for f in [*dotted, *gauss, *bern]}
        lookups = {f.name: "packed" for f in features if packed and self._lookup(f, None) is not None}
        scores = []
        for k in range(len(self.classes)):
            terms = wide.terms(gauss, bern, params, k)
            if dotted:
                weights = exp.Array(expressions=[sql.dbl(float(params[f.name][k])) for f in dotted])
                terms.append(exp.Anonymous(this="list_dot_product",
                                           expressions=[sql.col(COUNTS_COLUMN, "src"), weights]))
            # a tree child (tree-augmented) is conditioned on its parent too; the covered features' terms are one sum
            terms += [tree[f.name][k] if f.name in tree else self._term(f, params[f.name], k, input_types, dialect,
                                                                        nan_guard, lookups.get(f.name))
                      for f in features if f.name not in skip | covered]
            terms += [direct[k]] if direct else []
            if averaged:  # AODE: the naive Bayes score plus its average over super-parents
                terms.append(averaged[k])
            if self.uses_prior():
                terms.insert(0, sql.dbl(float(params["prior"][k])))
            scores.append(ClassScore(tuple(terms)))
        return scores

    def combiner(self) -> eskdb.Combiner | None:
        self.log_parameters()
        return eskdb.Combiner(len(self._ens.nets)) if self._ens is not None else None

    def feature_terms(self, input_types=None, dialect=None):
        """:meth:`class_terms` with one term per feature (no dot product over the count
        columns); the base is the class log-prior (0 when the score has none)."""
        s = self.hyper.structure
        if s == "aode" or mixture.members(s) or eskdb.ensemble(s):
            one = "naive" if s == "aode" else "skdb" if eskdb.ensemble(s) else "tan"  # of the same counts
            raise SqlnbError(f"explain: structure {s!r} averages probabilities over super-parents, structures or "
                             "members (a log-sum-exp), not a sum of per-feature terms, so it has no per-feature "
                             f"breakdown; explain a model of one structure of the same counts: "
                             f"with_params(structure={one!r})")
        out = []
        for score in self.class_terms(input_types, dialect, dot=False):
            terms = list(score.terms)
            base = terms.pop(0) if self.uses_prior() else sql.dbl(0.0)
            out.append(FeatureTerms(base, tuple(terms)))
        return out

    def _term(self, f: Feature, p: Any, k: int, input_types, dialect, nan_guard: bool,
              how: str | None = None) -> exp.Expression:
        """Feature ``f``'s term in class ``k``'s score, from its log-parameters ``p``
        (a categorical one found ``how``: default :meth:`_lookup`'s choice)."""
        fam = text.family_for(f)
        how = how or self._lookup(f, dialect)
        if how in ("in place", "packed"):
            term = fam.in_place_term if how == "in place" else fam.packed_term
            return term(f, p, k, (input_types or {}).get(f.name))
        if _unguarded(f):
            return fam.term(f, p, k, nan_guard=nan_guard, compiled=shares_subexpressions(dialect))
        if how == "values":  # a categorical column joined: its NaN test needs the input's type
            return fam.term(f, p, k, (input_types or {}).get(f.name))
        return fam.term(f, p, k)

    def terms_of(self, name: str, input_types=None, dialect=None, inline: bool = False) -> list[exp.Expression]:
        """Per class, the term feature ``name`` adds to the class score (as in
        :meth:`class_terms`, never folded into a dot product): what feature selection
        shares between the candidate subsets whose log-parameters of ``name`` agree.
        ``inline`` (DuckDB): a categorical column is looked up in place whatever the size
        of its vocabulary, without a join."""
        f = next((f for f in self._scoring_features(input_types) if f.name == name), None)
        if f is None:
            raise SqlnbError(f"{name!r} is not a feature of this model{suggest(name, self.feature_names)}")
        p = self.log_parameters()[name]
        how = "in place" if inline and dialect == "duckdb" and f.kind == "categorical" and f.bag is None else None
        return [self._term(f, p, k, input_types, dialect, True, how) for k in range(len(self.classes))]

    def class_scores(self, input_types=None, dialect=None, nan_guard: bool = True, dot: bool | None = None,
                     tree_dialect: str | None = None, tree_positions: Mapping[str, exp.Expression] | None = None,
                     packed: bool = False):
        return [t.expression() for t in self.class_terms(input_types, dialect, nan_guard, dot, tree_dialect,
                                                         tree_positions, packed)]

    def conditional_tables(self) -> dict[str, np.ndarray]:
        """Each tree child's ln p(child value | class, parent value), (K, n_parent, n_child)
        (:class:`tan.Tree`); ``{}`` for naive Bayes."""
        self.log_parameters()
        return dict(self._tree.cpt) if self._tree is not None else {}

    def tree_terms(self, input_types=None, dialect=None,
                   positions: Mapping[str, exp.Expression] | None = None) -> dict[str, list[exp.Expression]]:
        """Each tree child's per-class terms, as in :meth:`class_terms` (``positions`` as
        its ``tree_positions``); ``{}`` for naive Bayes."""
        params = self.log_parameters()
        if self._tree is None:
            return {}
        return self._terms_module().child_terms(self._tree, self._scoring_features(input_types), self.stats,
                                                params, dialect, input_types, positions)

    def _terms_module(self):
        """The module whose ``child_terms`` writes this structure's terms (tan or kdb)."""
        return skdb if isinstance(self._tree, skdb.Deep) else kdb if isinstance(self._tree, kdb.Network) else tan

    def tree_positions(self, input_types=None, dialect=None) -> dict[str, exp.Expression]:
        """Each tree feature's value position as its tree terms read it
        (:func:`tan.tree_positions`; AODE's super-parents, :func:`aode.positions`); ``{}``
        for naive Bayes."""
        self.log_parameters()
        if self._aode is not None:
            return aode.positions(self._aode, self._scoring_features(input_types), self.stats, dialect, input_types)
        if self._tree is None:
            return {}
        return tan.tree_positions(self._tree, self._scoring_features(input_types), self.stats, dialect, input_types)

    def score_long(self, tokens: Any, docs: Any = None, con=None, outputs: Sequence[str] = ("proba", "prediction"),
                   keep: Sequence[str] | None = None):
        """Score documents given as a long token table (a model from :func:`sqlnb.fit_long`).

        Parameters
        ----------
        tokens : source
            Token rows with the id, token (and count) columns named at fit time.
        docs : source, optional
            One row per document to score, with the id column; a document without any
            known token still gets the prior (and Bernoulli constant). Default: the
            distinct ids of ``tokens``, in the order of each document's first token row.
        con : DuckDB connection, optional
        outputs, keep
            As for :meth:`score`.

        Returns
        -------
        duckdb.DuckDBPyRelation
        """
        bags = [f for f in self.features if f.bag is not None and f.bag["layout"] == "long"]
        if not bags:
            raise SqlnbError("score_long scores models fitted with sqlnb.fit_long; use model.score")
        con = con if con is not None else new_connection()
        tok = text.resolve_long(con, tokens, bags[0])
        if docs is None:
            docs = text.first_token_docs(tok, bags[0])
        doc_src = text.resolve_long(con, docs, bags[0], docs=True)
        return con.sql(sql.render(text.long_scoring_query(self, tok, doc_src, outputs, keep, con)))

    def mutual_information(self):
        """Each discrete feature's (and bag term's) mutual information with the class, in
        nats, most informative first, from the stored counts (no data is read): see
        :func:`sqlnb.models.naive_bayes.information.mutual_information`."""
        from sqlnb.models.naive_bayes.information import mutual_information
        return mutual_information(self)

    def log_likelihood(self) -> float:
        """The training log-likelihood log p(D|θ) under this model's parameters, from the
        statistics (no data is read): :mod:`sqlnb.models.naive_bayes.likelihood`."""
        from sqlnb.models.naive_bayes.likelihood import log_likelihood
        return log_likelihood(self)

    def bic(self) -> float:
        """−2 log p(D|θ) + k ln N: :func:`sqlnb.models.naive_bayes.likelihood.bic`."""
        from sqlnb.models.naive_bayes.likelihood import bic
        return bic(self)

    # -- combining statistics -----------------------------------------------------------
    def merge(self, other: "NaiveBayes | Statistics", decay: float | None = None) -> "NaiveBayes":
        """This model updated with another fit's statistics (exactly the refit on the
        union). ``decay`` in (0, 1] first down-weights this model's statistics."""
        if decay is not None and not (isinstance(decay, (int, float)) and 0 < decay <= 1):
            raise SqlnbError(f"decay must be in (0, 1] (1 keeps all past rows), not {decay!r}")
        stats = other.stats if isinstance(other, NaiveBayes) else other
        base = self.stats.scaled(decay) if decay is not None else self.stats
        merged = base.merge(stats)
        report = dict(self.report)
        report["rows"] = merged.n_rows
        report["null_label_rows"] = merged.null_label_rows
        return NaiveBayes(self.label, self.label_type, self.features, merged, self.hyper, report, self.weight)

    # -- storage ------------------------------------------------------------------------
    def metadata(self) -> dict:
        return {
            "label": self.label,
            "label_type": self.label_type,
            "weight": self.weight,
            "features": [f.to_dict() for f in self.features],
            "hyperparameters": self.hyper.to_dict(self.classes),
            "report": self.report,
            **({"pair_features": list(self.stats.pairs.features)} if self.stats.pairs is not None else {}),
            **skdb.metadata(self.stats.pairs),  # kdb:K's joint counts, skdb's patterns
        }

    def parameter_tables(self) -> dict:
        """Part -> (pyarrow table, {column: SQL type to cast to}).

        ``classes`` (typed labels, weighted and unweighted counts), ``moments``
        (gaussian), ``sums`` (bernoulli/multinomial/complement), ``counts`` (categorical,
        non-zero cells only) and one ``values_<j>`` table per categorical feature ``j``
        holding its values in their own SQL type; ``pairs`` (tree-augmented models: pair
        counts, :func:`~sqlnb.models.naive_bayes.tan.pair_table`); ``cut_counts`` (binned
        features: per (class, value) counts, :func:`~sqlnb.models.naive_bayes.binning.cut_counts_table`).
        """
        import pyarrow as pa

        from sqlnb.store import arrow  # arrow.array: pyarrow.array without importing pandas
        s = self.stats
        K = len(s.classes)
        parts = {"classes": (pa.table({
            "class_index": arrow.array(range(K), pa.int32()),
            "label": arrow.array(list(s.classes)),
            "n": arrow.array(s.class_n, pa.float64()),
            "rows": arrow.array(s.class_rows, pa.float64()),
        }), {"label": self.label_type})}
        long: dict[str, dict[str, list]] = {
            "moments": {c: [] for c in ("class_index", "feature", "n", "mean", "m2", "rows", "rows_mean", "rows_m2")},
            "sums": {c: [] for c in ("class_index", "feature", "n", "total")},
            "counts": {c: [] for c in ("class_index", "feature", "value_index", "n")},
        }
        for j, f in enumerate(self.features):
            st = s.features[f.name]
            if isinstance(st, Bag):
                parts.update(text.bag_tables(j, st))
                continue
            if isinstance(st, Counts):
                ks, vs = np.nonzero(st.counts)
                t = long["counts"]
                t["class_index"] += ks.tolist()
                t["feature"] += [f.name] * len(ks)
                t["value_index"] += vs.tolist()
                t["n"] += st.counts[ks, vs].tolist()
                parts[f"values_{j}"] = (pa.table({"value_index": arrow.array(range(len(st.values)), pa.int32()),
                                                  "value": arrow.array(list(st.values))}),
                                        {"value": "INTEGER" if f.kind == "binned" else f.sql_type})  # bin numbers
                continue
            part = "moments" if isinstance(st, Moments) else "sums"
            t = long[part]
            t["class_index"] += list(range(K))
            t["feature"] += [f.name] * K
            for c in t:
                if c not in ("class_index", "feature"):
                    t[c] += np.asarray(getattr(st, c), dtype=float).tolist()
        if s.pairs is not None:
            parts["pairs"] = (tan.pair_table(s.pairs, s), {})
        if getattr(s.pairs, "joints", None) or getattr(s.pairs, "patterns", None) is not None:  # kdb:K, skdb
            parts.update(skdb.count_tables(s))
        if s.cuts:  # binned columns: the value counts their cut points come from
            parts["cut_counts"] = (cut_counts_table(s.cuts), {})
        for part, cols in long.items():
            if cols["class_index"]:
                parts[part] = (pa.table({c: arrow.array(v, pa.int32() if c in ("class_index", "value_index")
                                                      else pa.string() if c == "feature" else pa.float64())
                                         for c, v in cols.items()}), {})
        return parts

    @classmethod
    def from_tables(cls, meta: dict, tables: dict) -> "NaiveBayes":
        """Rebuild a model from :meth:`parameter_tables` as read back (pyarrow tables)."""
        ct = tables["classes"].sort_by("class_index").to_pydict()
        classes = ct["label"]
        K = len(classes)
        features = [Feature(**f) for f in meta["features"]]
        rows = {part: tables[part].to_pylist() for part in ("moments", "sums", "counts") if part in tables}
        feats: dict[str, Any] = {}
        for j, f in enumerate(features):
            if f.bag is not None:
                feats[f.name] = text.bag_from_tables(j, tables, K)
                continue
            if f"values_{j}" in tables:
                values = tables[f"values_{j}"].sort_by("value_index")["value"].to_pylist()
                counts = np.zeros((K, len(values)))
                for r in rows.get("counts", []):
                    if r["feature"] == f.name:
                        counts[r["class_index"], r["value_index"]] = r["n"]
                feats[f.name] = Counts(values, counts)
                continue
            part, fields = (("moments", ("n", "mean", "m2", "rows", "rows_mean", "rows_m2"))
                            if f.kind == "gaussian" else ("sums", ("n", "total")))
            mine = sorted((r for r in rows.get(part, []) if r["feature"] == f.name), key=lambda r: r["class_index"])
            feats[f.name] = (Moments if part == "moments" else Sums)(
                *(np.array([r[x] for r in mine], dtype=float) for x in fields))
        pairs = (tan.pairs_from_table(meta["pair_features"], tables.get("pairs"), feats, K)
                 if meta.get("pair_features") else None)
        # kdb:K's joint counts, skdb's patterns
        pairs = skdb.counts_from_tables(pairs, meta, tables, feats, K)
        cuts = cut_counts_from_table(tables.get("cut_counts"), [f.name for f in features if f.kind == "binned"], K)
        stats = Statistics(classes, np.array(ct["n"], dtype=float), np.array(ct["rows"], dtype=float),
                           feats, int(meta["report"].get("null_label_rows", 0)), pairs, cuts)
        hyper = dict(meta["hyperparameters"])
        # Models saved before feature_alpha was checked at fit may name columns that are no
        # (discrete) feature; such a key never had an effect, so it is dropped, not refused.
        discrete = {f.name for f in features if f.kind != "gaussian"}
        hyper["feature_alpha"] = {k: v for k, v in (hyper.get("feature_alpha") or {}).items() if k in discrete}
        return cls(meta["label"], meta["label_type"], features, stats,
                   Hyperparameters.from_dict(hyper, classes), meta["report"], meta.get("weight"))


register_kind(NaiveBayes.kind, NaiveBayes)
