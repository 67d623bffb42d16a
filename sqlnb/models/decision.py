"""Decision rules: which class a model predicts from its probabilities, inside the scoring SELECT.

By default a model predicts the most probable class (the argmax of the finish,
:mod:`sqlnb.models.finish`): the Bayes decision under 0/1 costs. A :class:`DecisionRule`
changes that for every model kind, in the same SELECT, from the probabilities
``p_j = p(j|x)`` the finish computes::

    costs      L(j, k) = cost of predicting k when the actual class is j (a K×K matrix
               over the model's sorted classes; pairs not given cost 0 on the diagonal
               and 1 off it)
               R_k = Σ_j p_j·L(j, k)                  the expected loss of predicting k
               prediction = the first class (in sorted order) with R_k = min_k R_k
               expected_cost = min_k R_k
    threshold  (two classes) predict CLASS when p(CLASS|x) ≥ P, else the other class;
               expected_cost = 1 − p(prediction), the expected 0/1 loss
    reject R   Chow's reject option: when the smallest expected loss exceeds R the row
               gets no prediction (NULL) and ``rejected`` is true. With 0/1 costs (no
               cost matrix, with or without a threshold) the smallest expected loss is
               1 − max_k p_k and the test is written ``max_k p_k < 1 − R``; on a
               rejected row ``expected_cost`` is that smallest expected loss.

``expected_cost`` (and ``rejected``, with a reject option) follow ``prediction`` in the
output; rows without probabilities (see :mod:`sqlnb.models.finish`) have NULL in all
three. The rule adds SELECT stages around the finish's last one and never changes
the row count or order. A rule equal to the default (0/1 costs, no threshold, no
reject option) leaves the SQL exactly as without a rule.

In SQL, only the terms with a non-zero cost are written (``p_j·1`` as ``p_j``), added
in class order: ``R_k`` is then the very sum a numpy loop over the classes gives from
``score``'s ``proba_*`` columns, and the same on every engine.

A rule is stored with the model (``sqlnb decide``, :func:`sqlnb.store.save_model`
writes :meth:`DecisionRule.to_dict` into the model's metadata) and used by every later
``score``, ``sql`` and ``evaluate``.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError, suggest
from sqlnb.sql.types import is_text_type
from sqlnb.models.finish import class_columns, label_text
from sqlnb.engines.duckdb import new_connection

#: Output columns of a rule (``rejected`` only with a reject option).
EXPECTED_COST, REJECTED = "expected_cost", "rejected"
#: Helper columns: R_k per class (``expected_cost_<class>``), min_k R_k, max_k p_k.
COST_PREFIX, MIN_COST, MAX_PROBA = "expected_cost_", "min_expected_cost", "max_proba"
#: The header of a costs CSV file.
COSTS_HEADER = ("actual", "predicted", "cost")


def _listed(classes: Sequence) -> str:
    shown = ", ".join(repr(label_text(c)) for c in list(classes)[:10])
    return shown + (f", ... ({len(classes)} classes)" if len(classes) > 10 else "")


def as_class(value: Any, classes: Sequence, label_type: str | None, where: str) -> int:
    """The index of the class ``value`` names: the class itself, its text, or its text
    read with the model's label type (``"1"`` is class 1 of an integer label, ``"t"``
    class true of a boolean one)."""
    classes = list(classes)
    if not isinstance(value, str):
        for i, c in enumerate(classes):
            if type(c) is type(value) and c == value:
                return i
    text = value if isinstance(value, str) else label_text(value)
    by_text = {label_text(c): i for i, c in enumerate(classes)}
    for t in (text, text.strip()):  # a CSV field as written, then without surrounding spaces
        if t in by_text:
            return by_text[t]
    if label_type is not None and not is_text_type(label_type):
        cast = _cast(text.strip(), label_type)
        if cast is not None and cast in classes:
            return classes.index(cast)
    raise SqlnbError(f"{where}: {text!r} is not a class of the model{suggest(text, by_text)}; "
                     f"the classes are {_listed(classes)}")


def _cast(text: str, label_type: str) -> Any:
    """``text`` read with the label type in DuckDB (:func:`sqlnb.sql.read_as`; NULL ->
    None): a label read as the model's label column was read, and ``"1.5"`` no class of
    an integer label (a plain ``TRY_CAST`` rounds it to 2)."""
    try:
        given = exp.select(exp.alias_(exp.Cast(this=exp.Placeholder(), to=exp.DataType.build("varchar")), "v",
                                      quoted=True))
        query = exp.select(sql.read_as(sql.col("v", "given"), label_type, "VARCHAR")).from_(
            exp.Subquery(this=given, alias=exp.TableAlias(this=sql.ident("given"))))
        with new_connection() as con:
            return con.execute(sql.render(query), [text]).fetchone()[0]
    except Exception:  # a type sqlglot or DuckDB cannot cast to: the label matches no class
        return None


def _number(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SqlnbError(f"{what} must be a number, not {value!r}") from None
    if not math.isfinite(x):
        raise SqlnbError(f"{what} must be a finite number, not {value!r}")
    return x


def read_costs(path: str, classes: Sequence, label_type: str | None) -> dict[tuple[int, int], float]:
    """A costs CSV file (header ``actual,predicted,cost``, one pair per line) as
    ``{(actual index, predicted index): cost}``, labels read with the model's label type.

    Raises
    ------
    SqlnbError
        One line naming the file, line and value: a missing file, another header, a
        line without three fields, a label that is no class, a cost that is not a
        finite number >= 0, a pair given twice.
    """
    try:
        # utf-8-sig: a file saved by Excel or Notepad as "UTF-8" starts with a byte-order
        # mark, which would otherwise be part of the first header field.
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SqlnbError(f"cannot read the costs file {path!r}: {e}") from None
    numbered = [(i + 1, r) for i, r in enumerate(rows) if any(field.strip() for field in r)]
    header = tuple(field.strip().lower() for field in numbered[0][1]) if numbered else ()
    if header != COSTS_HEADER:
        raise SqlnbError(f"the costs file {path!r} must start with the header line 'actual,predicted,cost', "
                         f"not {','.join(numbered[0][1]) if numbered else 'nothing'!r}")
    pairs: dict[tuple[int, int], float] = {}
    for line, row in numbered[1:]:
        where = f"costs file {path!r} line {line}"
        if len(row) != 3:
            raise SqlnbError(f"{where}: expected 3 fields actual,predicted,cost, found {len(row)}")
        j = as_class(row[0], classes, label_type, f"{where}, actual")
        k = as_class(row[1], classes, label_type, f"{where}, predicted")
        if (j, k) in pairs:
            raise SqlnbError(f"{where}: the pair {row[0].strip()!r},{row[1].strip()!r} is given twice; give it once")
        pairs[(j, k)] = _cost(row[2].strip(), f"{where}: the cost")
    return pairs


def _cost(value: Any, what: str) -> float:
    c = _number(value, what)
    if c < 0:
        raise SqlnbError(f"{what} must be a finite number >= 0 (a loss), not {value!r}")
    return c


def parse_threshold(text: str) -> tuple[str, float]:
    """``CLASS=P`` (split at the last ``=``, so a label may hold one) -> (CLASS, P)."""
    label, sep, p = text.rpartition("=")
    if not sep or not label:
        raise SqlnbError(f"--threshold takes CLASS=P (e.g. --threshold '>50K=0.3'), not {text!r}")
    return label, _number(p, f"the threshold probability in {text!r}")


@dataclass(frozen=True)
class DecisionRule:
    """How a model turns its probabilities into a prediction (module docstring).

    Build one with :meth:`for_model`; it is checked against the model's classes when made.

    Attributes
    ----------
    classes : tuple
        The model's classes, sorted (the rows and columns of ``costs``).
    costs : tuple of tuples of float, or None
        ``costs[j][k]`` = L(actual j, predicted k); None for 0/1 costs.
    threshold : (int, float) or None
        (index of CLASS, P): predict CLASS when p(CLASS|x) ≥ P (two classes only).
    reject : float or None
        Chow's reject option R: no prediction where the smallest expected loss exceeds R.
    """

    classes: tuple
    costs: tuple | None = None
    threshold: tuple | None = None
    reject: float | None = None

    def __post_init__(self) -> None:
        K = len(self.classes)
        if self.costs is not None:
            if len(self.costs) != K or any(len(r) != K for r in self.costs):
                raise SqlnbError(f"a cost matrix for {K} classes must be {K}x{K}")
            for j, row in enumerate(self.costs):
                for k, c in enumerate(row):
                    if not (isinstance(c, float) and math.isfinite(c) and c >= 0):
                        raise SqlnbError(f"the cost of predicting {label_text(self.classes[k])!r} when the class is "
                                         f"{label_text(self.classes[j])!r} must be a finite number >= 0, not {c!r}")
        if self.threshold is not None:
            if self.costs is not None:
                raise SqlnbError("give a cost matrix or a threshold, not both (a threshold is the rule of one "
                                 "cost matrix of two classes)")
            if K != 2:
                raise SqlnbError(f"a threshold CLASS=P decides between two classes; this model has {K} "
                                 "(give a cost matrix instead)")
            _, p = self.threshold
            if not (math.isfinite(p) and 0.0 <= p <= 1.0):
                raise SqlnbError(f"the threshold probability must be between 0 and 1, not {p!r}")
        if self.reject is not None and not (math.isfinite(self.reject) and self.reject >= 0):
            raise SqlnbError(f"the reject option R is the largest expected loss still decided: a finite number "
                             f">= 0, not {self.reject!r}")

    # -- making one ----------------------------------------------------------------------------
    @classmethod
    def for_model(cls, model: Any, costs: Any = None, threshold: Any = None,
                  reject: float | None = None) -> "DecisionRule":
        """The rule for ``model`` (its ``classes`` and ``label_type``).

        Parameters
        ----------
        costs : str, mapping or array, optional
            A CSV file path (:func:`read_costs`), a mapping ``{(actual, predicted): cost}``
            (labels or their text; pairs not given cost 0 on the diagonal and 1 off it),
            or a K×K array over the sorted classes.
        threshold : (label, P) or "LABEL=P", optional
        reject : float, optional
        """
        classes, label_type = list(model.classes), model.label_type
        matrix = None
        if costs is not None:
            K = len(classes)
            if isinstance(costs, (str, Mapping)):
                pairs = read_costs(costs, classes, label_type) if isinstance(costs, str) else {
                    (as_class(a, classes, label_type, "costs, actual"),
                     as_class(p, classes, label_type, "costs, predicted")): _cost(c, "a cost")
                    for (a, p), c in costs.items()}
                L = 1.0 - np.eye(K)
                for (j, k), c in pairs.items():
                    L[j, k] = c
            else:
                L = np.asarray(costs, dtype=float)
                if L.shape != (K, K):
                    raise SqlnbError(f"a cost matrix for {K} classes must be {K}x{K}, not of shape {L.shape}")
            matrix = tuple(tuple(float(c) for c in row) for row in L)
        if isinstance(threshold, str):
            threshold = parse_threshold(threshold)
        if threshold is not None:
            label, p = threshold
            threshold = (as_class(label, classes, label_type, "the threshold class"), _number(p, "the threshold"))
        rule = cls(tuple(classes), matrix, threshold, None if reject is None else _number(reject, "--reject R"))
        if rule.costs is not None and rule.costs == _zero_one(len(classes)):
            return cls(rule.classes, None, rule.threshold, rule.reject)  # 0/1 costs: the default rule
        return rule

    @property
    def is_default(self) -> bool:
        """The argmax under 0/1 costs: the scoring SELECT is the one without a rule."""
        return self.costs is None and self.threshold is None and self.reject is None

    def loss(self) -> np.ndarray:
        """L as a K×K array (0/1 when no costs were given)."""
        return np.array(self.costs if self.costs is not None else _zero_one(len(self.classes)), dtype=float)

    def for_classes(self, classes: Sequence) -> tuple["DecisionRule", str | None]:
        """This rule for ``classes``, a superset of its own (an update that brought new
        classes), and a line saying what changed (None when nothing did).

        A cost matrix is extended: the new classes' pairs get the costs of pairs a costs
        file leaves out (0 on the diagonal, 1 off it), the given costs stay. A threshold
        decides between two classes, so with more it no longer applies and is dropped (the
        prediction is then the most probable class). A reject option stays as it is.
        """
        classes = list(classes)
        new = [c for c in classes if c not in self.classes]
        if not new:
            return self, None
        names = ", ".join(repr(label_text(c)) for c in new)
        added = f"the update added class{'es' if len(new) > 1 else ''} {names}"
        costs, note = None, None
        if self.costs is not None:
            pos = [classes.index(c) for c in self.classes]
            L = 1.0 - np.eye(len(classes))
            L[np.ix_(pos, pos)] = self.loss()
            costs = tuple(tuple(float(c) for c in row) for row in L)
            note = (f"{added}: the stored cost matrix gives its pairs with the new class{'es' if len(new) > 1 else ''} "
                    "the default costs (0 on the diagonal, 1 off it); set their costs with sqlnb decide --costs")
        if self.threshold is not None:
            i, p = self.threshold
            kept = " (the reject option stays)" if self.reject is not None else ""
            note = (f"{added}: the stored rule 'predict {label_text(self.classes[i])} when p >= {p:g}' decides "
                    f"between two classes and no longer applies; predictions are now the most probable class{kept}; "
                    "set a rule again with sqlnb decide")
        return DecisionRule(tuple(classes), costs, None, self.reject), note

    # -- storing and showing --------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain data for the model's metadata and ``sqlnb show --format json``."""
        return {"classes": list(self.classes),
                "costs": None if self.costs is None else [list(r) for r in self.costs],
                "threshold": None if self.threshold is None else
                {"class": self.classes[self.threshold[0]], "p": self.threshold[1]},
                "reject": self.reject}

    @classmethod
    def from_dict(cls, d: Mapping, classes: Sequence) -> "DecisionRule":
        """The rule :meth:`to_dict` stored, for a model of ``classes``."""
        stored = [label_text(c) for c in d.get("classes", [])]
        if stored != [label_text(c) for c in classes]:
            raise SqlnbError(f"the stored decision rule is for the classes {stored}, not the model's; "
                             "set it again with sqlnb decide")
        costs = d.get("costs")
        t = d.get("threshold")
        return cls(tuple(classes), None if costs is None else tuple(tuple(float(c) for c in r) for r in costs),
                   None if t is None else (stored.index(label_text(t["class"])), float(t["p"])),
                   None if d.get("reject") is None else float(d["reject"]))

    def describe(self) -> str:
        """One line: the rule in words (``sqlnb show``)."""
        parts = []
        if self.costs is not None:
            zero_one = _zero_one(len(self.classes))
            changed = [f"{label_text(self.classes[j])}->{label_text(self.classes[k])} {c:g}"
                       for j, row in enumerate(self.costs) for k, c in enumerate(row) if c != zero_one[j][k]]
            parts.append("minimum expected cost (actual->predicted: " + ", ".join(changed)
                         + "; other pairs 0 on the diagonal, 1 off it)")
        elif self.threshold is not None:
            i, p = self.threshold
            parts.append(f"predict {label_text(self.classes[i])!r} when p({label_text(self.classes[i])}|x) >= {p:g}")
        else:
            parts.append("most probable class")
        if self.reject is not None:
            parts.append(f"reject when the smallest expected loss exceeds {self.reject:g}"
                         + (f" (max p < {1.0 - self.reject:g})" if self.costs is None else ""))
        return "; ".join(parts)

    # -- SQL --------------------------------------------------------------------------------------
    def helper_columns(self, prefix: str = "") -> list[str]:
        """The helper columns its stages add (they stay in an output that passes the
        source through with ``*``), each name after ``prefix``."""
        out = class_columns(prefix + COST_PREFIX, self.classes) + [prefix + MIN_COST] if self.costs is not None else []
        return out + ([prefix + MAX_PROBA] if self.costs is None and self.reject is not None else [])

    def output_columns(self) -> list[str]:
        return [EXPECTED_COST] + ([REJECTED] if self.reject is not None else [])

    def stage_columns(self, probas: Sequence[exp.Expression], prefix: str = "") -> list[list[tuple[str, exp.Expression]]]:
        """The helper columns :meth:`columns` reads, as steps of ``(name, expression)``
        each reading the step before: R_k per class then min_k R_k, or max_k p_k (none
        for a plain threshold). ``prefix`` goes before every name (explanations compute
        the decision again under names of their own, :mod:`sqlnb.models.explain`)."""
        if self.costs is not None:
            names = class_columns(prefix + COST_PREFIX, self.classes)
            return [[(n, self._risk(k, probas)) for k, n in enumerate(names)],
                    [(prefix + MIN_COST, _least([sql.col(n) for n in names]))]]
        if self.reject is not None:
            return [[(prefix + MAX_PROBA, sql.greatest([p.copy() for p in probas]))]]
        return []

    def stages(self, inner: exp.Select, probas: Sequence[exp.Expression]) -> exp.Select:
        """``inner`` (a SELECT of every finish column) in the SELECTs that add the helper
        columns (:meth:`stage_columns`), which :meth:`columns` reads."""
        for i, step in enumerate(self.stage_columns(probas), start=1):
            inner = exp.select(exp.Star(), *[_alias(e, n) for n, e in step]).from_(
                exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident(f"d{i}"))), copy=False)
        return inner

    def _risk(self, k: int, probas: Sequence[exp.Expression]) -> exp.Expression:
        """R_k = Σ_j p_j·L(j, k) over the non-zero costs, in class order (module docstring)."""
        terms = [p.copy() if c == 1.0 else exp.Mul(this=p.copy(), expression=sql.dbl(c))
                 for p, c in zip(probas, (row[k] for row in self.costs)) if c != 0.0]
        return sql.add(terms) if terms else sql.dbl(0.0)

    def _decide(self, undefined: exp.Expression, argmax: Sequence[exp.If], probas: Sequence[exp.Expression],
                values: Sequence[exp.Expression], prefix: str = "") -> tuple:
        """(the decided class as one of ``values`` per class, NULL when undefined or
        rejected; the expected cost; the reject test or None), over the columns of
        :meth:`stage_columns` named after ``prefix``. ``argmax`` are the branches WHEN
        b_c = B THEN ``values[c]``."""
        one = sql.dbl(1.0)
        if self.costs is not None:
            least = sql.col(prefix + MIN_COST)
            choose = [exp.If(this=exp.EQ(this=sql.col(n), expression=least.copy()), true=v.copy())
                      for n, v in zip(class_columns(prefix + COST_PREFIX, self.classes), values)]
            otherwise = None
            rejected = None if self.reject is None else exp.GT(this=least.copy(), expression=sql.dbl(self.reject))
            cost: exp.Expression = least.copy()
        else:
            # 0/1 costs: the smallest expected loss is 1 − max p (module docstring).
            rejected = None if self.reject is None else exp.LT(this=sql.col(prefix + MAX_PROBA),
                                                                 expression=sql.dbl(1.0 - self.reject))
            smallest = exp.Sub(this=one.copy(), expression=sql.col(prefix + MAX_PROBA))
            if self.threshold is None:
                choose, otherwise = [a.copy() for a in argmax], None
                cost = smallest.copy()
            else:
                i, p = self.threshold
                yes = exp.GTE(this=probas[i].copy(), expression=sql.dbl(p))
                choose = [exp.If(this=yes, true=values[i].copy())]
                otherwise = values[1 - i].copy()
                cost = exp.Case(ifs=[exp.If(this=yes.copy(), true=exp.Sub(this=one.copy(), expression=probas[i].copy()))],
                                default=exp.Sub(this=one.copy(), expression=probas[1 - i].copy()))
                if rejected is not None:
                    cost = exp.Case(ifs=[exp.If(this=rejected.copy(), true=smallest.copy())], default=cost)
        null_first = [exp.If(this=undefined.copy(), true=exp.null())]
        reject_if = [] if rejected is None else [exp.If(this=rejected.copy(), true=exp.null())]
        return exp.Case(ifs=null_first + reject_if + choose, default=otherwise), cost, rejected

    def columns(self, undefined: exp.Expression, argmax: Sequence[exp.If], probas: Sequence[exp.Expression],
                label_type: str | None) -> list[exp.Expression]:
        """``prediction``, ``expected_cost`` and (with a reject option) ``rejected``, over
        the columns of :meth:`stages`. ``undefined`` is true on rows without
        probabilities; ``argmax`` the finish's WHEN b_c = B THEN c branches."""
        values = [sql.value(v, label_type) for v in self.classes]
        prediction, cost, rejected = self._decide(undefined, argmax, probas, values)
        out = [_alias(prediction, "prediction"),
               _alias(exp.Case(ifs=[exp.If(this=undefined.copy(), true=exp.null())], default=cost), EXPECTED_COST)]
        if rejected is not None:
            out.append(_alias(exp.Case(ifs=[exp.If(this=undefined.copy(), true=exp.null())], default=rejected),
                              REJECTED))
        return out

    def decided_index(self, undefined: exp.Expression, argmax: Sequence[exp.If], probas: Sequence[exp.Expression],
                      prefix: str) -> exp.Expression:
        """The index (0-based, in the sorted classes) of the class ``prediction`` holds,
        NULL where it is NULL: the same tests as :meth:`columns`, over the columns of
        :meth:`stage_columns` with ``prefix``; ``argmax`` branches WHEN b_c = B THEN c."""
        return self._decide(undefined, argmax, probas, [exp.Literal.number(c) for c in range(len(self.classes))],
                            prefix)[0]


def _zero_one(K: int) -> tuple:
    return tuple(tuple(0.0 if j == k else 1.0 for k in range(K)) for j in range(K))


def _alias(e: exp.Expression, name: str) -> exp.Alias:
    return exp.Alias(this=e, alias=sql.ident(name))


def _least(items: list[exp.Expression]) -> exp.Expression:
    """``LEAST(items)`` of values never NULL where read (rows with probabilities)."""
    if len(items) == 1:
        return items[0]
    return exp.Least(this=items[0], expressions=items[1:], ignore_nulls=True)


# -- evaluation ------------------------------------------------------------------------------------
@dataclass
class DecisionMetrics:
    """How a rule's decisions fare on labelled rows (:func:`decision_metrics`).

    Attributes
    ----------
    rule : dict
        The rule (:meth:`DecisionRule.to_dict`).
    decided_rows : int
        Labelled rows with probabilities: accepted + rejected.
    rejected_rows, accepted_rows : int
        Of those, the rows without a prediction (rejected) and with one.
    rejection_rate : float or None
        rejected / decided.
    accepted_accuracy : float or None
        The accepted rows whose prediction is their label, over the accepted rows (a
        label that is no class of the model counts as an error, as in ``accuracy``).
    expected_cost : float or None
        The mean cost L(label, prediction) of the accepted rows whose label is a class
        of the model: the estimate, on this data, of the expected cost of a decision the
        rule makes. 0/1 costs under a threshold or a plain reject option.
    """

    rule: dict
    decided_rows: int
    rejected_rows: int
    accepted_rows: int
    rejection_rate: float | None
    accepted_accuracy: float | None
    expected_cost: float | None


def decision_metrics(rule: DecisionRule | None, cells: Sequence[tuple], no_proba_rows: int) -> DecisionMetrics | None:
    """The figures of a rule from the confusion cells of an evaluation: ``(k, y, p, n)``
    per labelled cell (k the label's class index or None, y a label that is no class,
    p the prediction, n rows). A rule's rejected rows are the cells with no prediction
    less the rows without probabilities (``no_proba_rows``), so no second pass over the
    data is needed. None without a rule (or with the default one)."""
    if rule is None or rule.is_default:
        return None
    classes, L = list(rule.classes), rule.loss()
    accepted = sum(int(n) for _, _, p, n in cells if p is not None)
    rejected = sum(int(n) for _, _, p, n in cells if p is None) - int(no_proba_rows)
    correct = sum(int(n) for k, _, p, n in cells if k is not None and p is not None and p == classes[k])
    known = [(k, classes.index(p), int(n)) for k, _, p, n in cells if k is not None and p is not None]
    weight = sum(n for _, _, n in known)
    cost = sum(n * L[k, i] for k, i, n in known)
    decided = accepted + rejected
    return DecisionMetrics(rule.to_dict(), decided, rejected, accepted,
                           rejected / decided if decided else None,
                           correct / accepted if accepted else None,
                           float(cost / weight) if weight else None)


def report_lines(d: DecisionMetrics, digits: int = 4) -> list[str]:
    """The lines of ``evaluate``'s text report about a rule."""
    rule = DecisionRule.from_dict(d.rule, d.rule["classes"])

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.{digits}f}"

    lines = [f"decision    {rule.describe()}",
             f"cost        {f(d.expected_cost)} per accepted row (expected cost: the mean of L(label, prediction))"]
    if rule.reject is not None:
        rate = "n/a" if d.rejection_rate is None else f"{100 * d.rejection_rate:.2f} %"
        lines.append(f"rejected    {d.rejected_rows:,} of {d.decided_rows:,} rows ({rate}); accuracy on the "
                     f"{d.accepted_rows:,} accepted {f(d.accepted_accuracy)} (rejected rows count as errors in "
                     "accuracy and are in the (none) column)")
    return lines
