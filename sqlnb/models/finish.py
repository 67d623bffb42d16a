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
subquery or CTE. When the source's columns are unknown (SQL exported without a
connection) every column is passed through with ``*``, so the helper columns ``jll_*``,
``max_jll``, ``exp_shifted_*``, ``sum_exp_shifted`` and ``log_evidence`` stay in the output. A row with ``b_c = −inf`` for every class has probability zero under
the model (only possible with the MLE estimator): its posterior is undefined, so its
probabilities and prediction are NULL and ``log_evidence`` is −inf — never NaN. A row
whose own values make a score undefined (an infinite count times a zero log-probability)
gets NULL ``log_evidence``, probabilities and prediction.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError

#: Output groups a scoring query can produce.
OUTPUTS = ("jll", "log_evidence", "log_proba", "proba", "prediction")
_NEG_INF = float("-inf")
#: Helper columns of the finish: B = max_c b_c, e_c = exp(b_c − B) and Σ_c e_c.
MAX_COLUMN, SHIFTED_PREFIX, SUM_COLUMN = "max_jll", "exp_shifted_", "sum_exp_shifted"
#: The source row's position, carried through a plan with a join (``keep_order``).
ROW_COLUMN = "sqlnb_row"


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


def generated_columns(classes: Sequence[Any], outputs: Sequence[str], keep_order: bool = False) -> list[str]:
    """Every column name the scoring SELECT makes: the outputs and the helper columns
    (``jll_*``, ``exp_shifted_*``, ``max_jll``, ``sum_exp_shifted``, ``log_evidence``), which
    stay in the output when the source passes through with ``*``. A source column of one
    of these names would appear twice."""
    helpers = class_columns("jll_", classes) + class_columns(SHIFTED_PREFIX, classes)
    helpers += [MAX_COLUMN, SUM_COLUMN, "log_evidence"] + ([ROW_COLUMN] if keep_order else [])
    return list(dict.fromkeys(output_columns(classes, outputs) + helpers))


def scoring_select(
    source_from: exp.Expression,
    scores: Sequence[exp.Expression],
    classes: Sequence[Any],
    label_type: str | None,
    source_columns: Sequence[str] | None,
    outputs: Sequence[str] = ("proba", "prediction"),
    keep: Sequence[str] | None = None,
    joins: Sequence[exp.Join] = (),
    fallback: Sequence[exp.Expression] | None = None,
    keep_order: bool = False,
    order_key: str | None = None,
) -> exp.Select:
    """Build the scoring SELECT.

    Parameters
    ----------
    source_from : sqlglot expression
        The source as a FROM item aliased ``src``.
    scores : list of sqlglot expressions
        ``b_c`` for each class, in the order of ``classes``; may reference ``src``.
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
    """
    unknown = [o for o in outputs if o not in OUTPUTS]
    if unknown:
        raise ValueError(f"unknown scoring outputs {unknown}; choose from {OUTPUTS}")
    jll = class_columns("jll_", classes)
    passthrough = list(keep) if keep is not None else (list(source_columns) if source_columns is not None else None)
    if passthrough is not None:
        generated = generated_columns(classes, outputs, keep_order)
        clash = sorted({c.lower() for c in passthrough} & {c.lower() for c in generated})
        if clash:
            raise SqlnbError(
                f"the source already has a column named {clash[0]!r}, which scoring adds; "
                "rename it or leave it out of the kept columns"
            )

    # Stage 1: the per-class scores next to the source's columns.
    src_cols = [exp.Column(this=exp.Star(), table=sql.ident("src"))]
    if passthrough is not None and source_columns is not None:
        src_cols = [sql.col(c, "src") for c in passthrough]
    if fallback is not None:
        # CASE evaluates a branch only for the rows it selects, so the guarded form costs
        # nothing on rows without NaN; the engine computes the repeated fast score once.
        scores = [exp.Case(ifs=[exp.If(this=exp.IsNan(this=s.copy()), true=f)], default=s)
                  for s, f in zip(scores, fallback)]
    if keep_order:
        numbered = exp.select(exp.alias_(exp.Window(this=exp.RowNumber()), ROW_COLUMN, quoted=True),
                              exp.Star()).from_(source_from)
        source_from = exp.Subquery(this=numbered, alias=exp.TableAlias(this=sql.ident("src")))
        if passthrough is not None and source_columns is not None:
            src_cols.append(sql.col(ROW_COLUMN, "src"))
    stage1 = exp.select(*src_cols, *[exp.alias_(s, n, quoted=True) for s, n in zip(scores, jll)]).from_(source_from)
    for j in joins:
        stage1.append("joins", j.copy())

    b = [sql.col(n) for n in jll]
    neg_inf = sql.dbl(_NEG_INF)

    def stage(select_list: list[exp.Expression], inner: exp.Select, alias: str) -> exp.Select:
        return exp.select(exp.Star(), *select_list).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident(alias))))

    # Stage 2: B = max_c b_c, once per row.
    big_b = sql.col(MAX_COLUMN)
    stage2 = stage([exp.alias_(sql.greatest([x.copy() for x in b]), MAX_COLUMN, quoted=True)], stage1, "s1")
    # Stage 3: e_c = exp(b_c − B), once per row and class: both Σ e_c and p(c|x) = e_c / Σ e_c
    # read them (recomputing exp(b_c − lse) for the probabilities cost ~0.3 s more per 10M
    # rows × 3 classes, benchmarks/README.md). 0 ≤ e_c ≤ 1 and the largest is exactly 1.
    shifted = class_columns(SHIFTED_PREFIX, classes)
    stage3 = stage([exp.alias_(exp.Exp(this=exp.Sub(this=x.copy(), expression=big_b.copy())), n, quoted=True)
                    for x, n in zip(b, shifted)], stage2, "s2")
    # Stage 4: lse = B + ln Σ e_c. With B = −inf every b_c − B is NaN, so that case is
    # answered directly. B is NaN only when the row's own values make a score undefined
    # (an infinite count times a zero log-probability, +inf − inf): NULL.
    total = sql.col(SUM_COLUMN)
    lse = exp.Case(
        ifs=[exp.If(this=exp.EQ(this=big_b.copy(), expression=neg_inf.copy()), true=neg_inf.copy()),
             exp.If(this=exp.IsNan(this=big_b.copy()), true=exp.null())],
        default=exp.Add(this=big_b.copy(), expression=exp.Ln(this=sql.add(sql.col(n) for n in shifted))),
    )
    stage4 = stage([exp.alias_(sql.add(sql.col(n) for n in shifted), SUM_COLUMN, quoted=True),
                    exp.alias_(lse, "log_evidence", quoted=True)], stage3, "s3")

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
        final += [exp.alias_(unless_undefined(exp.Sub(this=x.copy(), expression=ev.copy())), n, quoted=True)
                  for x, n in zip(b, class_columns("log_proba_", classes))]
    if "proba" in outputs:
        final += [exp.alias_(unless_undefined(exp.Div(this=sql.col(e), expression=total.copy())), n, quoted=True)
                  for e, n in zip(shifted, class_columns("proba_", classes))]
    if "prediction" in outputs:
        pred = exp.Case(
            ifs=[exp.If(this=undefined.copy(), true=exp.null())]
            + [exp.If(this=exp.EQ(this=x.copy(), expression=big_b.copy()), true=sql.value(v, label_type))
               for x, v in zip(b, classes)],
        )
        final.append(exp.alias_(pred, "prediction", quoted=True))
    out = exp.select(*final).from_(exp.Subquery(this=stage4, alias=exp.TableAlias(this=sql.ident("s4"))))
    if order_key is not None:
        return out.order_by(sql.col(order_key, "s4"))
    return out.order_by(sql.col(ROW_COLUMN, "s4")) if keep_order else out
