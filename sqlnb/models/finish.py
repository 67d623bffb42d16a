"""The scoring SELECT shared by every model kind.

A model contributes one SQL expression per class: its joint log-likelihood
``b_c = ln p(x, c)`` (naive Bayes, QDA) or any score defined up to a per-row constant
(LDA, logistic regression). This module finishes them the same way for all kinds::

    B      = max_c b_c                             GREATEST over the class columns
    e_c    = exp(b_c − B)                          in [0, 1]; the largest is exactly 1
    lse    = B + ln Σ_c e_c                        the max-shifted log-sum-exp
    log p(c|x) = b_c − lse ;  p(c|x) = e_c / Σ_c e_c
    prediction = the first class (in sorted order) with b_c = B

in five nested SELECTs (a column cannot be used in the SELECT that defines it, so B, e_c
and Σ e_c need their own stages), giving one SELECT that can be pasted into a query as a
subquery or CTE.

For Spark the first stages take another shape (:func:`shares_subexpressions`, the one place
that decides it). Spark compiles a chain of projections into one generated Java method
unless an expression occurs twice in one projection: such a common subexpression gets a
method of its own. A class score of 20 Gaussian columns × 3 classes made a method of
12,481 bytecodes, past the 8,000 HotSpot compiles, so it ran interpreted (3× slower than
with the limit respected). There, each class score is cut into parts of at most
:data:`PART_NODES` expression nodes, each part is written twice in the first SELECT (as
its own column and inside ``B = max_c Σ parts``) and the second SELECT adds the parts up
twice (``b_c`` and ``e_c = exp(Σ parts − B)``): every part and every sum is a common
subexpression, so each gets a small method, evaluated once per row. The parts are helper
columns ``part<i>_<class>`` (:func:`generated_columns`). Engines that do not share
repeated expressions (PostgreSQL, SQLite, ...) would compute them twice, so they keep
the plain shape. When the source's columns are unknown (SQL exported without a
connection) every column is passed through with ``*``, so the helper columns ``jll_*``,
``max_jll``, ``exp_shifted_*``, ``sum_exp_shifted`` and ``log_evidence`` stay in the output. A row with ``b_c = −inf`` for every class has probability zero under
the model (only possible with the MLE estimator): its posterior is undefined, so its
probabilities and prediction are NULL and ``log_evidence`` is −inf — never NaN. A row
whose own values make a score undefined (an infinite count times a zero log-probability)
gets NULL ``log_evidence``, probabilities and prediction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError

#: Output groups a scoring query can produce.
OUTPUTS = ("jll", "log_evidence", "log_proba", "proba", "prediction")
#: What scoring produces unless asked otherwise, in Python (``Model.score``, ``to_sql``) and on
#: the command line (``sqlnb score``, ``sqlnb sql``) alike: one probability per class and the
#: prediction. The other groups (``jll``, ``log_evidence``, ``log_proba``) are asked for by name.
DEFAULT_OUTPUTS = ("proba", "prediction")
_NEG_INF = float("-inf")
#: Helper columns of the finish: B = max_c b_c, e_c = exp(b_c − B) and Σ_c e_c.
MAX_COLUMN, SHIFTED_PREFIX, SUM_COLUMN = "max_jll", "exp_shifted_", "sum_exp_shifted"
#: Dialects whose planner pulls a subquery up into its parent, writing each column where it
#: is read. A calibrated score (read ~20 times by the finish) over an isotonic CASE (which
#: reads the log-odds once per threshold) then became an expression of thousands of copies
#: of the class scores: PostgreSQL planned a 60-row query into gigabytes, SQLite took 25 s
#: for 400 rows of a 300-threshold calibrator. Each calibration stage gets ``OFFSET 0``
#: (``LIMIT -1 OFFSET 0`` in SQLite), which both keep as a subquery computed once per row.
FLATTENS_SUBQUERIES = ("postgres", "sqlite")
#: Dialects whose first stage (the class scores) ends with ``OFFSET 0``. Unfenced,
#: PostgreSQL pulls the stages up into one projection and writes ``b_c`` wherever a later
#: stage reads it (B, e_c, Σ e_c, lse, each output: every class score about 50 times),
#: then evaluates each copy per row; with JIT on (the default), LLVM compiles all of them.
#: 40 Gaussian columns x 3 classes x 600 rows took 66 s and a 3.4 GB backend (0.8 s with
#: JIT off), and a 580-column model on 1,500 rows got the server OOM-killed.
#: Fenced, each class score is computed once per row: 0.03 s and 19 MB, and the 580-column
#: model 1.4 s and 73 MB (docs/dialects.md). SQLite's flattener copies the same way, but
#: its shape is left as measured and tested there (its calibration stages are fenced).
FENCES_CLASS_SCORES = ("postgres",)
#: Helper columns of a class score cut into parts: ``part<i>_<class>``.
PART_PREFIX = "part"
#: The source row's position, carried through a plan with a join (``keep_order``).
ROW_COLUMN = "sqlnb_row"
#: A row's count features as one list, for the class terms' dot products (DuckDB).
COUNTS_COLUMN = "sqlnb_counts"


#: Largest part of a class score, in sqlglot expression nodes, on engines where
#: :func:`shares_subexpressions`: Spark generates about 5-8 bytecodes per node, so a part
#: stays far below HotSpot's 8,000-bytecode limit for compiling a method.
PART_NODES = 400


def shares_subexpressions(dialect: str | None) -> bool:
    """Whether the scoring SELECT for ``dialect`` writes each part of a class score twice
    so that the engine compiles it into a method of its own (module docstring). Spark's
    whole-stage code generation does that for a repeated expression and evaluates it once;
    PostgreSQL or SQLite would evaluate it twice. DuckDB keeps the plain shape: it runs
    no JIT-compiled code per query, and its time is unchanged (benchmarks/README.md)."""
    return dialect == "spark"


@dataclass(frozen=True)
class ClassScore:
    """A class score as a sum of ``terms`` (a model's prior, one term per feature, ...),
    NULL on rows where ``guard`` is not true (LDA, QDA and logistic regression need every
    feature). ``whole``, when given, is the score as one expression if it is written
    otherwise than ``guard ? Σ terms``; it equals that sum up to rounding."""

    terms: tuple[exp.Expression, ...]
    guard: exp.Expression | None = None
    whole: exp.Expression | None = None

    def expression(self, copy: bool = True) -> exp.Expression:
        """The score as one expression (the plain shape); with ``copy=False`` made of this
        score's own term nodes, so the score must not be used again."""
        if self.whole is not None:
            return self.whole.copy() if copy else self.whole
        return self._guarded(sql.add([t.copy() if copy else t for t in self.terms]))

    def parts(self, limit: int = PART_NODES) -> list[exp.Expression]:
        """The score cut into sums of consecutive terms of at most ``limit`` nodes each
        (a larger term is a part of its own), each guarded; their sum is the score. Made of
        this score's own term nodes: the score must not be used again."""
        bounds: list[int] = []
        size = limit
        for i, t in enumerate(self.terms):
            n = sum(1 for _ in t.walk())
            if size + n > limit:
                bounds.append(i)
                size = 0
            size += n
        bounds.append(len(self.terms))
        out = [self._guarded(sql.add(list(self.terms[a:z]))) for a, z in zip(bounds, bounds[1:])]
        return out or [self._guarded(sql.dbl(0.0))]

    def _guarded(self, e: exp.Expression) -> exp.Expression:
        if self.guard is None:
            return e
        return exp.Case(ifs=[exp.If(this=self.guard.copy(), true=e)])


@dataclass(frozen=True)
class Extension:
    """Stages added after the finish (e.g. explanations, :mod:`sqlnb.models.explain`).

    ``inputs`` are ``(name, expression over src)`` computed in stage 1 next to the class
    scores (they may read the lookups joined there) and carried through every stage;
    ``wrap`` takes stage 4 (every column so far, ``jll_*``, ``max_jll`` and
    ``log_evidence`` included) and returns the SELECT(s) around it, passing them on with
    ``*``; ``outputs`` are the columns it adds that the final SELECT keeps, ``helpers``
    the other names it adds (refused as source column names like the finish's own).
    """

    inputs: tuple[tuple[str, exp.Expression], ...]
    wrap: Callable[[exp.Select], exp.Select]
    outputs: tuple[str, ...]
    helpers: tuple[str, ...] = ()


def label_text(v: Any) -> str:
    """How a class label appears in a column name (``proba_<label>``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


#: Longest column name, in UTF-8 bytes, that every dialect keeps whole (PostgreSQL cuts
#: identifiers at 63 bytes, so two long names differing only past it would be one column).
MAX_NAME_BYTES = 63
#: Hex digits of the label's hash in a column name that cannot be the plain one.
HASH_DIGITS = 8


def class_columns(prefix: str, classes: Sequence[Any]) -> list[str]:
    """One column name per class: ``prefix + label`` (``proba_yes``, ``proba_0``) when
    that is unambiguous everywhere, else ``prefix + label`` cut to fit ``_<hash>``.

    The plain name is kept when no other class's plain name equals it up to case (DuckDB
    and Spark fold case, so ``proba_A`` and ``proba_a`` would be one column; Unicode case
    folding is used, the strictest) and it fits :data:`MAX_NAME_BYTES`. Otherwise, and
    for every class of a case-colliding group, the name is the plain one cut to leave
    room for ``_`` and the first :data:`HASH_DIGITS` hex digits of the SHA-256 of the
    label's text (more digits if that name is taken): so a name never equals another
    class's plain name, nor another name, in any dialect. The map is shown by ``sqlnb
    show``. Labels ``A``, ``a`` and ``a_2`` give ``proba_A_<hash of A>``,
    ``proba_a_<hash of a>`` and ``proba_a_2``.
    """
    plain = [f"{prefix}{label_text(v)}" for v in classes]
    folded = [p.casefold() for p in plain]
    count: dict[str, int] = {}
    for f in folded:
        count[f] = count.get(f, 0) + 1
    taken = set(folded)  # no hashed name may be any class's plain name
    names: list[str] = [""] * len(plain)
    for i, p in enumerate(plain):
        if count[folded[i]] == 1 and len(p.encode()) <= MAX_NAME_BYTES:
            names[i] = p
    for i, p in enumerate(plain):
        if not names[i]:
            names[i] = _hashed_name(p, label_text(classes[i]), taken)
            taken.add(names[i].casefold())
    return names


def _hashed_name(plain: str, text: str, taken: set[str]) -> str:
    """``plain`` cut (at a character boundary) to leave room for ``_<hash>`` within
    :data:`MAX_NAME_BYTES`, with as many hash digits as make it a new name."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    for n in range(HASH_DIGITS, len(digest) + 1):
        suffix = f"_{digest[:n]}"
        head = plain.encode()[:MAX_NAME_BYTES - len(suffix)].decode(errors="ignore")
        if (head + suffix).casefold() not in taken:
            return head + suffix
    raise SqlnbError(f"cannot name a column for class {text!r}: every name tried is taken")


def output_columns(classes: Sequence[Any], outputs: Sequence[str]) -> list[str]:
    """Names of the columns a scoring query adds, in order."""
    cols: list[str] = []
    for group in OUTPUTS:
        if group not in outputs:
            continue
        if group in ("log_evidence", "prediction"):
            cols.append(group)
        else:
            cols += class_columns(group + "_", classes)
    return cols


def generated_columns(classes: Sequence[Any], outputs: Sequence[str], keep_order: bool = False,
                      parts: int = 0, decision: Any = None) -> list[str]:
    """Every column name the scoring SELECT makes: the outputs and the helper columns
    (``jll_*``, ``exp_shifted_*``, ``max_jll``, ``sum_exp_shifted``, ``log_evidence``, and
    ``part<i>_*`` for the first ``parts`` parts of a cut class score), which stay in the
    output when the source passes through with ``*``; with a ``decision`` rule also its
    columns (:mod:`sqlnb.models.decision`). A source column of one of these names would
    appear twice."""
    helpers = class_columns("jll_", classes) + class_columns(SHIFTED_PREFIX, classes)
    helpers += [MAX_COLUMN, SUM_COLUMN, "log_evidence"] + ([ROW_COLUMN] if keep_order else [])
    for i in range(parts):
        helpers += class_columns(f"{PART_PREFIX}{i}_", classes)
    if decision is not None and not decision.is_default and "prediction" in outputs:
        helpers += decision.output_columns() + decision.helper_columns()
    return list(dict.fromkeys(output_columns(classes, outputs) + helpers))


def scoring_select(
    source_from: exp.Expression,
    scores: Sequence[exp.Expression | ClassScore],
    classes: Sequence[Any],
    label_type: str | None,
    source_columns: Sequence[str] | None,
    outputs: Sequence[str] = ("proba", "prediction"),
    keep: Sequence[str] | None = None,
    joins: Sequence[exp.Join] = (),
    fallback: Sequence[exp.Expression | ClassScore] | None = None,
    keep_order: bool = False,
    order_key: str | None = None,
    dialect: str | None = None,
    prelude: Sequence[tuple[str, exp.Expression]] = (),
    decision: Any = None,
    extension: Extension | None = None,
    calibration: Any = None,
    conformal: Any = None,
    combiner: Any = None,
) -> exp.Select:
    """Build the scoring SELECT.

    Parameters
    ----------
    source_from : sqlglot expression
        The source as a FROM item aliased ``src``.
    scores : list of sqlglot expressions or ClassScore
        ``b_c`` for each class, in the order of ``classes``; may reference ``src``. A
        :class:`ClassScore` can be cut into parts where :func:`shares_subexpressions`.
    classes : list
        Class labels in sorted order (ties in the argmax go to the first).
    label_type : str or None
        SQL type of the labels, for typed literals in ``prediction``.
    source_columns : list of str or None
        The source's columns; ``None`` when unknown (then every source column is passed
        through with ``*`` and the helper columns stay in the output).
    outputs : list of str
        Which of :data:`OUTPUTS` to produce.
    keep : list of str, optional
        Source columns to pass through (default: all of them).
    joins : list of sqlglot Join, optional
        Lookups the scores read from (e.g. one row per categorical value holding every
        class's log-probability), LEFT JOINed to the source in the first stage.
    fallback : list of sqlglot expressions, optional
        Per class, the score to use on rows where ``scores`` is NaN: ``scores`` are then
        a fast form that skips per-term NaN guards (a NaN input propagates to the sum)
        and ``fallback`` the guarded form, evaluated only for those rows. At 10M rows ×
        20 Gaussian columns × 3 classes the guarded class scores took ~3.0 s, the gated
        ones ~1.6 s (benchmarks/README.md).
    keep_order : bool
        Number the source's rows before the joins and end with ``ORDER BY`` that number
        (DuckDB keeps the scan order through projections and filters, not through a
        parallel join). ``row_number() OVER ()`` runs as a streaming window in the scan's
        order. The number is a helper column, not an output.
    order_key : str, optional
        A passed-through column to end with ``ORDER BY`` (instead of ``keep_order``).
    dialect : str, optional
        Where the SELECT will run: decides its shape (:func:`shares_subexpressions`).
    prelude : list of (name, expression), optional
        Helper columns computed once per row in a SELECT around the source (still aliased
        ``src``), which ``scores`` read as ``src.name``. A helper that reads another by
        its bare name goes in a SELECT around the one defining it (:func:`_layers`). They
        are never outputs: with the source's columns unknown, stage 1 passes
        ``src.* EXCLUDE (name, ...)`` (DuckDB, the only dialect given a prelude).
    decision : sqlnb.models.decision.DecisionRule, optional
        How ``prediction`` is chosen from the probabilities, when not the argmax
        (:mod:`sqlnb.models.decision`): its stages go between stage 4 and the outputs,
        and ``expected_cost`` (and ``rejected``) follow ``prediction``.
    calibration : Calibration, optional
        A calibrator (:mod:`sqlnb.models.calibration`): the scores are computed as
        ``uncalibrated_<class>`` and its stages turn them into the ``jll_<class>`` the finish
        reads. A calibrated model keeps the plain shape on every engine. Columns the
        calibrator outputs (Venn–Abers's intervals) follow the probabilities.
    conformal : ConformalSets, optional
        Conformal prediction sets (:mod:`sqlnb.models.conformal`), with ``prediction``:
        their stages go after the probabilities, before a decision rule's, and the set
        columns follow the prediction's.
    combiner : eskdb.Combiner, optional
        An ensemble's stages (:class:`sqlnb.models.naive_bayes.eskdb.Combiner`): ``scores``
        are then its members' raw scores (its ``raw_columns``), and its stages turn them into
        the class scores (``jll_<class>``, or a calibrator's raw columns), in every dialect.
    """
    unknown = [o for o in outputs if o not in OUTPUTS]
    if unknown:
        raise ValueError(f"unknown scoring outputs {unknown}; choose from {OUTPUTS}")
    jll = class_columns("jll_", classes)
    shared = shares_subexpressions(dialect) and calibration is None and combiner is None
    if shared:
        parts = [s.parts() if isinstance(s, ClassScore) and f is None else [_gate(s, f)]
                 for s, f in zip(scores, fallback or [None] * len(scores))]
    else:
        parts = [[_gate(s, f)] for s, f in zip(scores, fallback or [None] * len(scores))]
    n_parts = max(len(p) for p in parts) if shared else 0
    passthrough = list(keep) if keep is not None else (list(source_columns) if source_columns is not None else None)
    if passthrough is not None:
        generated = generated_columns(classes, outputs, keep_order, n_parts if n_parts > 1 else 0, decision)
        generated += [name for name, _ in prelude]
        if extension is not None:
            generated += [*extension.outputs, *extension.helpers, *(name for name, _ in extension.inputs)]
        generated += calibration.helper_columns(classes) if calibration is not None else []
        generated += combiner.helper_columns(classes) if combiner is not None else []
        if conformal is not None and "prediction" in outputs:
            generated += conformal.output_columns(classes, dialect) + conformal.helper_columns(classes, dialect)
        clash = sorted({c.lower() for c in passthrough} & {c.lower() for c in generated})
        if clash:
            raise SqlnbError(
                f"the source already has a column named {clash[0]!r}, which scoring adds; "
                "rename it or leave it out of the kept columns"
            )

    # Stage 1: the per-class scores next to the source's columns.
    helpers = [sql.col(name) for name, _ in prelude]
    src_cols = [exp.Column(this=exp.Star(except_=helpers or None), table=sql.ident("src"))]
    if passthrough is not None and source_columns is not None:
        src_cols = [sql.col(c, "src") for c in passthrough]
    for layer in _layers(prelude):
        pre = exp.select(exp.Star(), *[_as(e, name) for name, e in layer]).from_(source_from, copy=False)
        source_from = exp.Subquery(this=pre, alias=exp.TableAlias(this=sql.ident("src")))
    if keep_order:
        numbered = exp.select(_as(exp.Window(this=exp.RowNumber()), ROW_COLUMN),
                              exp.Star()).from_(source_from, copy=False)
        source_from = exp.Subquery(this=numbered, alias=exp.TableAlias(this=sql.ident("src")))
        if passthrough is not None and source_columns is not None:
            src_cols.append(sql.col(ROW_COLUMN, "src"))
    carried = [_as(e, name) for name, e in extension.inputs] if extension is not None else []
    if conformal is not None and "prediction" in outputs:
        if conformal.by is not None and source_columns is not None and conformal.by not in source_columns:
            raise SqlnbError(f"the model's conformal sets have a threshold per value of column {conformal.by!r}, "
                             f"which the rows scored lack; score rows with that column, or fit the sets again "
                             f"without --by")
        carried += [_as(e, name) for name, e in conformal.inputs()]
    b = [sql.col(n) for n in jll]
    big_b = sql.col(MAX_COLUMN)
    shifted = class_columns(SHIFTED_PREFIX, classes)

    def stage(select_list: list[exp.Expression], inner: exp.Select, alias: str,
              drop: Sequence[str] = ()) -> exp.Select:  # SELECT * EXCLUDE (drop), select_list
        return exp.select(exp.Star(except_=[sql.col(n) for n in drop] or None), *select_list).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident(alias))), copy=False)

    if shared:
        # Stage 1: each part twice, as a column and inside B = max_c Σ parts; stage 2: each
        # Σ parts twice, as b_c and inside e_c = exp(b_c − B). Every part and sum is then a
        # common subexpression, which Spark compiles into a small method of its own (module
        # docstring); both sums are the same tree over the same values, so b_c = B exactly
        # for the argmax. Referring to B in every e_c also keeps the optimiser from merging
        # stage 2 into stage 1 (it inlines a column into the next SELECT only when it is read
        # there once), which would make each whole class score one method again.
        names = [class_columns(f"{PART_PREFIX}{i}_", classes) for i in range(n_parts)]
        cols1: list[exp.Expression] = []
        for c, ps in enumerate(parts):
            if len(ps) == 1:
                cols1.append(_as(ps[0], jll[c]))
            else:
                cols1 += [_as(p, names[i][c]) for i, p in enumerate(ps)]
        # Parenthesised: SQL reads a + b + c left to right, so without them the parts would not be
        # subtrees of the sum (and it would add the terms in another order than stage 2 does).
        sums = [sql.add([sql.paren(p.copy()) for p in ps]) for ps in parts]
        stage1 = exp.select(*src_cols, *cols1, _as(sql.greatest(sums), MAX_COLUMN), *carried
                            ).from_(source_from, copy=False)
        for j in joins:
            stage1.append("joins", j.copy())
        score_cols = [sql.add(sql.col(names[i][c]) for i in range(len(ps))) if len(ps) > 1 else sql.col(jll[c])
                      for c, ps in enumerate(parts)]
        cols2 = [_as(score_cols[c].copy(), jll[c]) for c, ps in enumerate(parts) if len(ps) > 1]
        cols2 += [_as(exp.Exp(this=exp.Sub(this=x.copy(), expression=big_b.copy())), n)
                  for x, n in zip(score_cols, shifted)]
        stage3 = stage(cols2, stage1, "s2")
    else:
        named = jll if calibration is None else calibration.raw_columns(classes)
        combined = combiner.stages(classes, named) if combiner is not None else []
        named = combiner.raw_columns(classes) if combiner is not None else named
        stage1 = exp.select(*src_cols, *[_as(ps[0], n) for ps, n in zip(parts, named)], *carried
                            ).from_(source_from, copy=False)
        for j in joins:
            stage1.append("joins", j.copy())
        if dialect in FENCES_CLASS_SCORES:
            stage1 = stage1.offset(0, copy=False)
        calibrated = calibration.stages(classes, dialect) if calibration is not None else []
        for i, cols in enumerate([*combined, *calibrated]):
            stage1 = stage([_as(e, n) for n, e in cols if e is not None], stage1, f"c{i}",
                           [n for n, e in cols if e is None])
            if dialect in FLATTENS_SUBQUERIES:
                stage1 = stage1.offset(0, copy=False)
        # Stage 2: B = max_c b_c, once per row.
        stage2 = stage([_as(sql.greatest([x.copy() for x in b]), MAX_COLUMN)], stage1, "s1")
        # Stage 3: e_c = exp(b_c − B), once per row and class: both Σ e_c and p(c|x) = e_c / Σ e_c
        # read them (recomputing exp(b_c − lse) for the probabilities cost ~0.3 s more per 10M
        # rows × 3 classes, benchmarks/README.md). 0 ≤ e_c ≤ 1 and the largest is exactly 1.
        stage3 = stage([_as(exp.Exp(this=exp.Sub(this=x.copy(), expression=big_b.copy())), n)
                        for x, n in zip(b, shifted)], stage2, "s2")
    neg_inf = sql.dbl(_NEG_INF)
    # Stage 4: lse = B + ln Σ e_c. With B = −inf every b_c − B is NaN, so that case is
    # answered directly. B is NaN only when the row's own values make a score undefined
    # (an infinite count times a zero log-probability, +inf − inf): NULL.
    total = sql.col(SUM_COLUMN)
    lse = exp.Case(
        ifs=[exp.If(this=exp.EQ(this=big_b.copy(), expression=neg_inf.copy()), true=neg_inf.copy()),
             exp.If(this=sql.is_nan(big_b.copy()), true=exp.null())],
        default=exp.Add(this=big_b.copy(), expression=exp.Ln(this=sql.add(sql.col(n) for n in shifted))),
    )
    stage4 = stage([_as(sql.add(sql.col(n) for n in shifted), SUM_COLUMN),
                    _as(lse, "log_evidence")], stage3, "s3")
    if extension is not None:
        stage4 = extension.wrap(stage4)

    # Conformal sets (after the probabilities are known, before a decision rule).
    sets = conformal is not None and "prediction" in outputs
    if sets:
        stage4 = conformal.stages(stage4, [exp.Div(this=sql.col(e), expression=total.copy()) for e in shifted], classes,
                                  fence=dialect in FLATTENS_SUBQUERIES)
    # A decision rule's stages (after the probabilities are known, before the outputs).
    decide = decision is not None and not decision.is_default and "prediction" in outputs
    if decide:
        if len(decision.classes) != len(classes):
            raise ValueError("the decision rule is for another model's classes")
        stage4 = decision.stages(stage4, [exp.Div(this=sql.col(e), expression=total.copy()) for e in shifted])

    # Stage 5: the outputs.
    ev = sql.col("log_evidence")
    # No posterior: p(x) = 0 (−inf), or no score at all (NULL: an undefined score, or a
    # kind whose scores are NULL for incomplete rows). NULL must be tested explicitly:
    # the argmax below compares scores, and NaN = NaN is true in DuckDB.
    undefined = exp.Or(this=exp.Is(this=ev.copy(), expression=exp.Null()),
                       expression=exp.EQ(this=ev.copy(), expression=neg_inf.copy()))

    def unless_undefined(x: exp.Expression) -> exp.Expression:
        return exp.Case(ifs=[exp.If(this=undefined.copy(), true=exp.null())], default=x)

    final: list[exp.Expression] = []
    if passthrough is None:
        final.append(exp.Star())  # source columns and the helper columns (module docstring)
    else:
        final += [sql.col(c) for c in passthrough]
        if "jll" in outputs:
            final += [sql.col(n) for n in jll]
        if "log_evidence" in outputs:
            final.append(ev.copy())
    if "log_proba" in outputs:
        final += [_as(unless_undefined(exp.Sub(this=x.copy(), expression=ev.copy())), n)
                  for x, n in zip(b, class_columns("log_proba_", classes))]
    if "proba" in outputs:
        final += [_as(unless_undefined(exp.Div(this=sql.col(e), expression=total.copy())), n)
                  for e, n in zip(shifted, class_columns("proba_", classes))]
        if passthrough is not None and calibration is not None:  # (with * they pass through)
            final += [sql.col(n) for n in calibration.output_columns(classes)]
    if "prediction" in outputs:
        argmax = [exp.If(this=exp.EQ(this=x.copy(), expression=big_b.copy()), true=sql.value(v, label_type))
                  for x, v in zip(b, classes)]
        if decide:
            final += decision.columns(undefined, argmax, [exp.Div(this=sql.col(e), expression=total.copy())
                                                          for e in shifted], label_type)
        else:
            final.append(_as(exp.Case(ifs=[exp.If(this=undefined.copy(), true=exp.null())] + argmax), "prediction"))
        if sets:
            final += conformal.columns(undefined, classes, label_type, dialect)
    if extension is not None and passthrough is not None:
        final += [sql.col(n) for n in extension.outputs]
    out = exp.select(*final).from_(exp.Subquery(this=stage4, alias=exp.TableAlias(this=sql.ident("s4"))), copy=False)
    if order_key is not None:
        return out.order_by(sql.col(order_key, "s4"), copy=False)
    return out.order_by(sql.col(ROW_COLUMN, "s4"), copy=False) if keep_order else out


def _layers(prelude: Sequence[tuple[str, exp.Expression]]) -> list[list[tuple[str, exp.Expression]]]:
    """The prelude's helpers by SELECT, innermost first: a helper goes one SELECT out from
    the last one defining a helper it reads by its bare (unqualified) name, so that a
    per-row value (a feature's value position) is computed once and read by the helpers
    built on it (the lists of places a structure's tables are read at)."""
    names = {name for name, _ in prelude}
    reads = {name: {c.name for c in e.find_all(exp.Column) if not c.table and c.name in names} - {name}
             for name, e in prelude}
    depth: dict[str, int] = {}

    def level(name: str) -> int:
        if name not in depth:
            depth[name] = 1 + max((level(n) for n in reads[name]), default=-1)
        return depth[name]

    layers: list[list[tuple[str, exp.Expression]]] = [[] for _ in range(1 + max(map(level, names), default=-1))]
    for name, e in prelude:
        layers[depth[name]].append((name, e))
    return layers


def _as(e: exp.Expression, name: str) -> exp.Alias:
    """``e AS "name"``, taking ``e`` itself (sqlglot's ``alias_`` copies it: with the class
    scores inside, every copy is the size of the whole query; building digits' scoring
    tree, 64 columns x 10 classes, made 48,000 nodes for one of 10,000)."""
    return exp.Alias(this=e, alias=sql.ident(name))


def _whole(score: exp.Expression | ClassScore, copy: bool = True) -> exp.Expression:
    if isinstance(score, ClassScore):
        return score.expression(copy=copy)
    return score.copy() if copy else score


def _gate(score: exp.Expression | ClassScore, fallback: exp.Expression | ClassScore | None) -> exp.Expression:
    """``score``, or with a ``fallback`` ``CASE WHEN NOT isfinite(score) THEN fallback ELSE
    score END``: CASE evaluates a branch only for the rows it selects, so the guarded form
    costs nothing on rows without NaN; the engine computes the repeated fast score once.

    ``NOT isfinite``, not ``isnan``: DuckDB folds ``isnan`` of arithmetic on a Parquet
    column from pyarrow's statistics (:func:`sqlnb.sql.is_nan`), whose DuckDB spelling
    would also write the score twice more. A score of ±inf takes the fallback too, which
    gives it the same value (the two forms differ only in how a NaN input is read)."""
    if fallback is None:
        return _whole(score, copy=False)
    quick = _whole(score, copy=False)
    return exp.Case(ifs=[exp.If(this=sql.nonfinite(quick.copy()), true=_whole(fallback, copy=False))], default=quick)
