"""Training under dbt: a fitted model's sufficient statistics as incremental dbt models.

``sqlnb dbt --train`` adds to the package ``sqlnb_<name>`` (:mod:`sqlnb.workflows.dbt`)
dbt models that aggregate, from labelled rows, the statistics a naive Bayes model *is*
(:mod:`sqlnb.stats`), with the model's label, features, families and thresholds fixed
when the package is generated:

``<name>_classes``
    per class: ``n`` (rows), ``rows``.
``<name>_moments``
    per class and Gaussian column: ``n``, ``mean``, ``m2`` (``Σ (x − mean)²``).
``<name>_sums``
    per class and Bernoulli, multinomial or complement column: ``n`` (rows where the
    column is not NULL) and ``total`` (``Σ [x > threshold]``, or ``Σ x``).
``<name>_counts_<j>``
    per class and value of the categorical column ``j``: ``n``; of a binned column, per
    class and bin number ``0 … B−1`` (the cut points are the model's, fixed when the
    package is generated: only the counts are retrained).
``<name>_values`` (binned columns)
    per class, binned column and value: ``n``, what the test that the cut points still
    hold reads (:mod:`sqlnb.workflows.dbt_cuts`; on Spark through the tables
    ``<name>_cuts_running`` and ``<name>_cuts_mdl_<t>`` of its MDL columns,
    :func:`sqlnb.workflows.dbt_cuts.tables`).
``<name>_pairs``, ``<name>_triples`` (TAN, KDB, AODE; triples: KDB(2))
    per class and pair of tree features: the pair counts; per class and (child, parent,
    parent) triple of the generated structure: the joint counts
    (:mod:`sqlnb.workflows.dbt_structures`; AODE's tables derived from the pair counts:
    :mod:`sqlnb.workflows.dbt_aode`).

The rows are the source ``sqlnb_<name>_train.rows`` (its schema and table are the vars
``sqlnb_<name>_train_schema``, default the target's schema, and
``sqlnb_<name>_train_table``, default ``<name>_train``). Rows with a NULL label are not
counted (and the source's ``not_null`` test fails on them). Every model is
``incremental`` (``delete+insert`` on its key): a first run, or ``dbt build
--full-refresh``, aggregates every row; a later run aggregates only the new rows and merges
their statistics into the stored ones exactly as ``sqlnb update`` does
(:meth:`sqlnb.stats.Statistics.merge`): counts add, Gaussian moments merge by Chan, Golub
& LeVeque. Which rows are new:

* with ``--loaded-at COLUMN``: the rows whose ``COLUMN`` is greater than the largest
  ``COLUMN`` already counted in that table (every stored row keeps the largest
  ``COLUMN`` of the run that wrote it, in ``loaded_at``). A row loaded later with a
  smaller or equal ``COLUMN`` is never counted, and a NULL ``COLUMN`` fails the source's
  ``not_null`` test;
* without: every row of the source, each run (the source is a batch table that holds only
  the rows not yet counted, replaced before each run).

Every statement is a sqlglot tree rendered once per adapter; Jinja only names the
relations (``source()``, ``{{ this }}``), chooses the branch (``is_incremental()``) and
checks the source's column types before anything runs (a changed type is a compile error
naming the column and the cast that fixes it).

:func:`import_model` reads the tables back into a model (the generating model's features
and hyperparameters over the statistics dbt counted), which ``sqlnb show``, ``score``,
``evaluate`` and ``sql`` then use as any stored model.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.errors import SqlnbError, shell_word
from sqlnb.models.naive_bayes.families import REGISTRY
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.sql.types import is_float
from sqlnb.stats import Counts, Moments, Statistics, Sums, sorted_values
from sqlnb.workflows import dbt_cuts, dbt_params, dbt_structures
from sqlnb.workflows.dbt import ADAPTERS, _jinja, _yaml

#: The families whose statistics the training models count.
TRAINED = ("gaussian", "bernoulli", "multinomial", "complement", "categorical", "binned")
#: Counted per (class, value): the categories, or a binned column's bin numbers.
COUNTED = ("categorical", "binned")

#: SQL type names (lower case, before any ``(``) of each kind of value, per adapter's
#: spelling: what the compile-time check accepts for a column of that kind.
TYPE_NAMES = {
    "number": ["tinyint", "smallint", "integer", "int", "bigint", "hugeint", "utinyint", "usmallint", "uinteger",
               "ubigint", "uhugeint", "int1", "int2", "int4", "int8", "real", "float", "float4", "float8", "double",
               "double precision", "decimal", "numeric", "boolean", "bool"],
    "text": ["varchar", "text", "character varying", "string", "char", "character", "bpchar"],
    "boolean": ["boolean", "bool"],
}

_SRC = "src"


def check_trainable(model: Any) -> None:
    """Raise a one-line :class:`SqlnbError` when ``model`` is not one the training
    models can count: a plain naive Bayes model of ordinary columns, unweighted."""
    if not isinstance(model, NaiveBayes):
        raise SqlnbError(f"--train counts the statistics of naive Bayes models; model {model.name!r} is "
                         f"{getattr(model, 'kind', '?')}: fit a naive Bayes model (sqlnb fit) to train under dbt")
    if model.hyper.structure not in (None, "none", "naive", *dbt_structures.STRUCTURES):
        raise SqlnbError(f"--train counts naive Bayes statistics and TAN's, KDB's and AODE's pair counts; model "
                         f"{model.name!r} has structure {model.hyper.structure!r}, whose counts it does not count: fit "
                         f"it with --structure tan, kdb:1, kdb:2, aode or none")
    if model.weight is not None:
        raise SqlnbError(f"--train counts unweighted rows; model {model.name!r} was fitted with the weight column "
                         f"{model.weight!r}: fit it without --weight")
    for f in model.features:
        if f.bag is not None or f.kind not in TRAINED:
            fix = "fit again without it (--exclude)"
            raise SqlnbError(f"--train counts {', '.join(TRAINED)} columns; column {f.name!r} of model "
                             f"{model.name!r} is {'a token bag' if f.bag is not None else f.kind}: {fix}")


def _parts(model: NaiveBayes) -> dict[str, list]:
    """Table suffix -> the features it counts (``counts_<j>``: the categorical column j)."""
    out: dict[str, list] = {"classes": []}
    gauss = [f for f in model.features if f.kind == "gaussian"]
    sums = [f for f in model.features if f.kind in ("bernoulli", "multinomial", "complement")]
    if gauss:
        out["moments"] = gauss
    if sums:
        out["sums"] = sums
    for j, f in enumerate(model.features):
        if f.kind in COUNTED:
            out[f"counts_{j}"] = [f]
    if dbt_cuts.binned(model):
        out["values"] = dbt_cuts.binned(model)
    if dbt_structures.paired(model):
        out["pairs"] = dbt_structures.paired(model)
    if dbt_structures.triples(model):
        out["triples"] = dbt_structures.paired(model)
    return out


def counted_value(f) -> exp.Expression:
    """The value a counted column is counted by (over ``src``): the category, or the bin
    number of a binned column under the model's cut points (NULL for NULL)."""
    return REGISTRY["binned"].bin_index(f, scoring=False) if f.kind == "binned" else sql.col(f.name, _SRC)


# -- the statistics queries -----------------------------------------------------------------------

def _dbl(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=exp.DataType.build("double"))


def _zero(e: exp.Expression) -> exp.Expression:
    return exp.Coalesce(this=e, expressions=[sql.dbl(0.0)])


def _keys(part: str) -> list[str]:
    if part in ("pairs", "triples"):
        return list(dbt_structures.PAIR_KEYS if part == "pairs" else dbt_structures.TRIPLE_KEYS)
    if part == "values":
        return list(dbt_cuts.KEYS)
    return ["class"] if part == "classes" else ["class", "value"] if part.startswith("counts_") else ["class", "feature"]


def _values(part: str) -> list[str]:
    return {"classes": ["n", "rows"], "moments": ["n", "mean", "m2"], "sums": ["n", "total"]}.get(part, ["n"])


def _new_rows(model: NaiveBayes, name: str, loaded_at: str | None, incremental: bool, dialect: str) -> exp.Select:
    """The labelled rows to count: all, or (incremental, with ``loaded_at``) those loaded
    after the largest ``loaded_at`` the table holds."""
    label = sql.col(model.label, _SRC)
    where: exp.Expression = exp.Not(this=exp.Is(this=label, expression=exp.Null()))
    if incremental and loaded_at:
        last = exp.select(exp.Max(this=sql.col("loaded_at"))).from_(exp.Table(this=_jinja(_stored(dialect))))
        where = exp.and_(where, exp.GT(this=sql.col(loaded_at, _SRC), expression=exp.Subquery(this=last)))
    src = exp.Table(this=_jinja(f"{{{{ source('sqlnb_{name}_train', 'rows') }}}}"),
                    alias=exp.TableAlias(this=sql.ident(_SRC)))
    return exp.select(exp.Star()).from_(src).where(where)


def _batch(model: NaiveBayes, part: str, features: list, loaded_at: str | None, dialect: str) -> exp.Select:
    """The statistics of the rows in ``new`` (aliased ``src``), in the table's layout."""
    label = sql.col(model.label, _SRC)
    src = exp.Table(this=sql.ident("new"), alias=exp.TableAlias(this=sql.ident(_SRC)))
    mark = ([exp.alias_(exp.Subquery(this=exp.select(exp.Max(this=sql.col(loaded_at))).from_(sql.table("new"))),
                        "loaded_at", quoted=True)] if loaded_at else [])
    head = [exp.alias_(label, "class", quoted=True)]
    if part == "classes":
        rows = _dbl(exp.Count(this=exp.Star()))
        return exp.select(*head, exp.alias_(rows, "n", quoted=True), exp.alias_(rows.copy(), "rows", quoted=True),
                          *mark).from_(src).group_by(label.copy())
    if part == "pairs":
        return dbt_structures.pairs_batch(model, features, head, mark, src, dialect)
    if part == "triples":
        return dbt_structures.triples_batch(model, head, mark, src)
    if part == "values":
        return dbt_cuts.values_batch(model, mark, src)
    if part.startswith("counts_"):
        x = counted_value(features[0])
        return (exp.select(*head, exp.alias_(x, "value", quoted=True),
                           exp.alias_(_dbl(exp.Count(this=exp.Star())), "n", quoted=True), *mark)
                .from_(src).where(exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())))
                .group_by(label.copy(), x.copy()))
    selects = []
    for f in features:
        aggs = REGISTRY[f.kind].aggregates(f, None)  # the fit's own aggregates of the column
        if part == "moments":  # COUNT, AVG, VAR_POP
            n = _dbl(aggs[0])
            stats = [n, _zero(aggs[1]), _zero(exp.Mul(this=_dbl(aggs[2]), expression=n.copy()))]
        else:  # bernoulli: COUNT, COUNT_IF(x > t); multinomial, complement: COUNT, SUM(x)
            stats = [_dbl(aggs[0]), _zero(_dbl(aggs[1]))]
        selects.append(exp.select(*[c.copy() for c in head], exp.alias_(exp.Literal.string(f.name), "feature",
                                                                          quoted=True),
                                  *[exp.alias_(s, c, quoted=True) for s, c in zip(stats, _values(part))],
                                  *[m.copy() for m in mark]).from_(src.copy()).group_by(label.copy()))
    return sql.union_all(selects)


def _stored(dialect: str) -> str:
    """The relation holding the stored statistics: ``{{ this }}``; on Spark the copy
    ``<this>_prev`` the model's pre-hook took (:func:`keep_previous`), since Spark cannot
    overwrite a table a query of the same statement reads."""
    if dialect == "spark":
        return "{{ this.incorporate(path={'identifier': this.identifier ~ '_prev'}) }}"
    return "{{ this }}"


def _merged(part: str, loaded_at: str | None, dialect: str) -> exp.Select:
    """The batch's statistics merged with the stored ones of the same key (:func:`_stored`):
    counts add; moments by Chan, Golub & LeVeque (:func:`sqlnb.stats.chan_merge`). The keys
    of the batch (replaced by ``delete+insert``); on Spark every key of either side (a FULL
    JOIN: the run overwrites the whole table)."""
    b, o = "b", "o"
    full = dialect == "spark"

    def bc(c):
        return _zero(sql.col(c, b)) if full else sql.col(c, b)

    def oc(c):
        return _zero(sql.col(c, o))

    def key(c):
        return exp.Coalesce(this=sql.col(c, b), expressions=[sql.col(c, o)]) if full else sql.col(c, b)

    cols = [exp.alias_(key(k), k, quoted=True) for k in _keys(part)]
    if part == "moments":
        n1, m1, s1, n2, m2, s2 = oc("n"), oc("mean"), oc("m2"), bc("n"), bc("mean"), bc("m2")
        n = sql.paren(exp.Add(this=n1, expression=n2))
        delta = sql.paren(exp.Sub(this=m2.copy(), expression=m1.copy()))
        empty1, empty2 = n1.copy().eq(sql.dbl(0.0)), n2.copy().eq(sql.dbl(0.0))
        mean = exp.Case(ifs=[exp.If(this=empty1, true=m2.copy()), exp.If(this=empty2, true=m1.copy())],
                        default=exp.Add(this=m1.copy(), expression=exp.Mul(this=delta, expression=sql.paren(
                            exp.Div(this=n2.copy(), expression=n.copy())))))
        both = exp.Add(this=s1, expression=s2)
        m2_ = exp.Case(ifs=[exp.If(this=exp.or_(empty1.copy(), empty2.copy()), true=both.copy())],
                       default=exp.Add(this=both.copy(), expression=exp.Mul(
                           this=exp.Mul(this=delta.copy(), expression=delta.copy()),
                           expression=sql.paren(exp.Div(this=sql.paren(exp.Mul(this=n1.copy(), expression=n2.copy())),
                                                        expression=n.copy())))))
        cols += [exp.alias_(n, "n", quoted=True), exp.alias_(mean, "mean", quoted=True),
                 exp.alias_(m2_, "m2", quoted=True)]
    else:
        cols += [exp.alias_(exp.Add(this=oc(c), expression=bc(c)), c, quoted=True) for c in _values(part)]
    if loaded_at:
        cols.append(exp.alias_(key("loaded_at"), "loaded_at", quoted=True))
    on = exp.and_(*[sql.col(k, o).eq(sql.col(k, b)) for k in _keys(part)])
    return (exp.select(*cols).from_(exp.Table(this=sql.ident("batch"), alias=exp.TableAlias(this=sql.ident(b))))
            .join(exp.Table(this=_jinja(_stored(dialect)), alias=exp.TableAlias(this=sql.ident(o))), on=on,
                  join_type="full" if full else "left"))


def statistics_sql(model: NaiveBayes, name: str, part: str, dialect: str, loaded_at: str | None,
                   incremental: bool) -> str:
    """One training model's SELECT for ``dialect``: every row's statistics (a first run,
    a full refresh), or the new rows' merged into the stored ones (``incremental``)."""
    features = _parts(model)[part]
    batch = _batch(model, part, features, loaded_at, dialect)
    if incremental:
        tree = _merged(part, loaded_at, dialect)
    else:
        tree = exp.select(exp.Star()).from_(sql.table("batch"))
    tree = tree.with_(sql.ident("new"), as_=_new_rows(model, name, loaded_at, incremental, dialect)).with_(
        sql.ident("batch"), as_=batch)
    return sql.render(tree, dialect, pretty=True)


# -- the package's files ---------------------------------------------------------------------------

def _value_kind(sql_type: str, numeric: bool = False) -> str:
    """What the compile-time check accepts for a column: a number (or a boolean) for a
    numeric family (``numeric``); else the kind of value its categories (or classes) are."""
    t = sql_type.upper()
    if numeric:
        return "number"
    if t in ("BOOLEAN", "BOOL"):
        return "boolean"
    return "text" if t.startswith(("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR")) else "number"


def _checks(model: NaiveBayes, loaded_at: str | None) -> list[dict]:
    """The source columns the training models read, each with the kind of value it must
    hold and the fix to say when it does not."""
    out = [{"column": model.label, "kind": _value_kind(model.label_type),
            "fix": f"it is the label, whose classes are {model.label_type} values: cast it to {model.label_type}"}]
    for f in model.features:
        kind = _value_kind(f.sql_type, numeric=f.kind != "categorical")
        what = f"a {f.kind} feature of type {f.sql_type}"
        fix = (f"the model reads it as {what}: cast it to {f.sql_type} in the source query, or fit a new model "
               "and generate the package again")
        out.append({"column": f.name, "kind": kind, "fix": fix})
    if loaded_at:
        out.append({"column": loaded_at, "kind": "any", "fix": "it is the loaded-at column (--loaded-at)"})
    return out


def macros_file(model: NaiveBayes, name: str, loaded_at: str | None) -> str:
    """``macros/train_<name>.sql``: per table, the statistics SELECT of each adapter (both
    branches), and the check of the source's columns they run first."""
    ns = f"sqlnb_{name}"
    checks = json.dumps(_checks(model, loaded_at), sort_keys=True)
    out = [f"{{# Generated by sqlnb dbt --train from model {json.dumps(str(model.name))}; do not edit: generate it "
           "again. #}", "",
           f"{{% macro {ns}_check_training(relation) %}}",
           "  {#- A compile error when a column the training models read is missing or holds another kind of value. -#}",
           "  {%- if execute -%}",
           f"  {{%- set names = {json.dumps(TYPE_NAMES, sort_keys=True)} -%}}",
           "  {%- set found = {} -%}",
           "  {%- for c in adapter.get_columns_in_relation(relation) -%}"
           "{%- do found.update({c.name | lower: c.dtype | lower}) -%}{%- endfor -%}",
           f"  {{%- for check in {checks} -%}}",
           "    {%- set dtype = found.get(check.column | lower) -%}",
           "    {%- if dtype is none -%}",
           f"      {{{{ exceptions.raise_compiler_error('{ns}: the training rows ' ~ relation ~ ' have no column ' ~ "
           "check.column ~ '; ' ~ check.fix) }}",
           "    {%- elif check.kind != 'any' and (dtype.split('(')[0] | trim) not in names[check.kind] -%}",
           f"      {{{{ exceptions.raise_compiler_error('{ns}: column ' ~ check.column ~ ' of ' ~ relation ~ ' has type ' "
           "~ dtype ~ ', not a ' ~ check.kind ~ ' type; ' ~ check.fix) }}",
           "    {%- endif -%}",
           "  {%- endfor -%}",
           "  {%- endif -%}",
           "{% endmacro %}", "", *keep_previous(ns)]
    for part in _parts(model):
        macro = f"{ns}_train_{part}"
        out += ["", f"{{% macro {macro}() %}}",
                f"  {{{{ {ns}_check_training(source('{ns}_train', 'rows')) }}}}",
                f"  {{{{ return(adapter.dispatch('{macro}', '{ns}')()) }}}}", "{% endmacro %}",
                "", f"{{% macro default__{macro}() %}}",
                f"  {{{{ exceptions.raise_compiler_error('{macro}: sqlnb rendered it for {', '.join(ADAPTERS)}, not for ' "
                "~ target.type) }}", "{% endmacro %}"]
        for adapter, dialect in ADAPTERS.items():
            out += ["", f"{{% macro {adapter}__{macro}() %}}", "{% if is_incremental() %}",
                    statistics_sql(model, name, part, dialect, loaded_at, True), "{% else %}",
                    statistics_sql(model, name, part, dialect, loaded_at, False), "{% endif %}", "{% endmacro %}"]
    return "\n".join(out) + "\n"


def _value_checks(model: NaiveBayes) -> list[tuple[exp.Expression, str]]:
    """(condition over ``src``, what is wrong and the fix) for each value the fit refuses:
    NaN or ±inf in a numeric column of a floating type, a negative count in a multinomial
    or complement column."""
    out = []
    for f in model.features:
        if f.kind == "categorical":
            continue
        x = REGISTRY[f.kind].value(f)  # binned: the raw number, before its bin
        if is_float(f.sql_type):
            out.append((exp.Not(this=sql.paren(sql.finite(x))), f"column {f.name} holds NaN or an infinite value; replace them "
                                                     "with NULL in the source to count them as missing"))
        if f.kind in ("multinomial", "complement"):
            out.append((exp.LT(this=x.copy(), expression=sql.dbl(0.0)),
                        f"column {f.name} has a negative count; kind {f.kind} needs counts >= 0: fix the rows, or "
                        f"fit the model with --feature-kind {shell_word(f.name, '=gaussian')}"))
    return out


def _values_test(model: NaiveBayes, dialect: str) -> str | None:
    """The rows of ``{{ model }}`` holding a value the fit refuses (:func:`_value_checks`),
    each with the first problem, or None when no column can hold one."""
    checks = _value_checks(model)
    if not checks:
        return None
    problem = exp.Case(ifs=[exp.If(this=cond, true=exp.Literal.string(text)) for cond, text in checks])
    src = exp.Table(this=_jinja("{{ model }}"), alias=exp.TableAlias(this=sql.ident(_SRC)))
    query = exp.select(exp.alias_(problem, "problem", quoted=True)).from_(src).where(
        exp.or_(*[cond.copy() for cond, _ in checks]))
    return sql.render(query, dialect, pretty=True)


def tests_file(model: NaiveBayes, name: str) -> str | None:
    """``macros/train_tests_<name>.sql``: the generic test ``sqlnb_<name>_values`` (no
    NaN or infinity in a numeric column, no negative count); for a structure, the test
    ``sqlnb_<name>_structure`` of ``<name>_pairs`` (the stored counts would choose the
    generated structure: :func:`dbt_structures.structure_test_sql`); for binned columns,
    ``sqlnb_<name>_cuts`` of ``<name>_values`` (they would give the generated cut points:
    :func:`dbt_cuts.cuts_test_sql`); None without any."""
    ns = f"sqlnb_{name}"
    tests = {"values": lambda d: _values_test(model, d), "structure": lambda d: dbt_structures.structure_test_sql(
        model, name, d), "cuts": lambda d: dbt_cuts.cuts_test_sql(model, name, d)}
    tests = {k: body for k, body in tests.items() if body("duckdb") is not None}
    if not tests:
        return None
    out = [f"{{# Generated by sqlnb dbt --train from model {json.dumps(str(model.name))}; do not edit. #}}"]
    for test, body in tests.items():
        out += ["", f"{{% test {ns}_{test}(model) %}}",
                f"  {{{{ return(adapter.dispatch('{ns}_{test}_sql', '{ns}')(model)) }}}}", "{% endtest %}"]
        for adapter, dialect in ADAPTERS.items():
            out += [f"{{% macro {adapter}__{ns}_{test}_sql(model) %}}", body(dialect), "{% endmacro %}"]
    return "\n".join(out) + "\n"


def keep_previous(ns: str) -> list[str]:
    """The macro ``<ns>_keep_previous(step)``: on Spark, before an incremental run, the
    statements of the pre-hooks that copy the stored statistics to ``<this>_prev``
    (:func:`_stored`); nothing elsewhere (a hook that renders empty is not run)."""
    return [f"{{% macro {ns}_keep_previous(step) %}}",
            "  {%- if target.type == 'spark' and is_incremental() -%}",
            "    {%- set prev = this.incorporate(path={'identifier': this.identifier ~ '_prev'}) -%}",
            "    {%- if step == 'drop' -%}drop table if exists {{ prev }}"
            "{%- else -%}create table {{ prev }} using parquet as select * from {{ this }}{%- endif -%}",
            "  {%- endif -%}", "{% endmacro %}"]


def _model_file(model: NaiveBayes, name: str, part: str) -> str:
    """An incremental model: ``delete+insert`` on its key; on Spark (plain parquet tables,
    no delete) ``insert_overwrite`` of the whole table, merged from the copy its pre-hooks take."""
    ns = f"sqlnb_{name}"
    keys = "[" + ", ".join(f"'{k}'" for k in _keys(part)) + "]"
    hooks = f'["{{{{ {ns}.{ns}_keep_previous(\'drop\') }}}}", "{{{{ {ns}.{ns}_keep_previous(\'copy\') }}}}"]'
    return (f"{{{{ config(materialized='incremental', incremental_strategy=('insert_overwrite' if target.type == "
            f"'spark' else 'delete+insert'), unique_key=(none if target.type == 'spark' else {keys}), "
            f"pre_hook={hooks}, enabled=var('{ns}_train', true)) }}}}\n"
            f"{{{{ {ns}.{ns}_train_{part}() }}}}\n")


def schema_file(model: NaiveBayes, name: str, loaded_at: str | None) -> str:
    """``models/train/schema.yml``: the training source, its tests (label not NULL and
    among the model's classes, counts >= 0, loaded-at not NULL) and the training models."""
    ns = f"sqlnb_{name}"
    numbers = all(isinstance(c, (int, float)) for c in model.classes)
    values = [c if numbers else str(c) for c in model.classes]
    lines = ["version: 2", "", "sources:", f"  - name: {ns}_train",
             f"    schema: \"{{{{ var('{ns}_train_schema', target.schema) }}}}\"", "    tables:",
             "      - name: rows", f"        identifier: \"{{{{ var('{ns}_train_table', '{name}_train') }}}}\"",
             f"        description: {_yaml(f'the labelled rows model {name} is trained on')}"]
    if _values_test(model, "duckdb") is not None:
        lines += ["        data_tests:", f"          - {ns}_values"]
    lines += ["        columns:", f"          - name: {_yaml(model.label)}", "            data_tests:",
              "              - not_null", "              - accepted_values:", "                  arguments:",
              "                    values: [" + ", ".join(_yaml(v) for v in values) + "]"]
    if numbers:
        lines.append("                    quote: false")
    if loaded_at:
        lines += [f"          - name: {_yaml(loaded_at)}", "            data_tests:", "              - not_null"]
    lines += ["", "models:"]
    for part, feats in _parts(model).items():
        what = f"sqlnb statistics of model {name}: {part}" + (
            f" of column {feats[0].name}" if part.startswith("counts_") else "")
        lines += [f"  - name: {name}_{part}", f"    description: {_yaml(what)}"]
        if part == "pairs" and dbt_structures.structure_checks(model):
            lines += ["    data_tests:", f"      - {ns}_structure"]
        if part == "values":
            lines += ["    data_tests:", f"      - {ns}_cuts"]
    return "\n".join(lines) + "\n"


def training_files(model: NaiveBayes, name: str, loaded_at: str | None = None) -> dict[str, str]:
    """Relative path -> content of the training part of package ``sqlnb_<name>``."""
    check_trainable(model)
    files = {f"macros/train_{name}.sql": macros_file(model, name, loaded_at),
             "models/train/schema.yml": schema_file(model, name, loaded_at)}
    tests = tests_file(model, name)
    if tests is not None:
        files[f"macros/train_tests_{name}.sql"] = tests
    for part in _parts(model):
        files[f"models/train/{name}_{part}.sql"] = _model_file(model, name, part)
    files.update(dbt_params.files(model, name))
    files.update(dbt_cuts.model_files(model, name))
    return files


# -- reading the statistics back -------------------------------------------------------------------

def _read(engine, schema: str | None, table: str, columns: Sequence[str]) -> list[tuple]:
    tree = exp.select(*[sql.col(c) for c in columns]).from_(sql.table(table, schema))
    try:
        return engine.execute(tree)
    except SqlnbError:
        raise
    except Exception as e:  # the table is missing: dbt has not built it there
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SqlnbError(f"cannot read the dbt table {sql.render(sql.table(table, schema))} ({first}); run dbt build "
                         "on the package sqlnb dbt --train wrote, and give --schema where dbt writes") from None


def import_model(model: NaiveBayes, con: Any, name: str, schema: str | None = None) -> NaiveBayes:
    """``model`` (the model the training package was generated from) over the statistics
    dbt counted in the tables ``<schema>.<name>_*``: its features, families and
    hyperparameters, the counted classes and statistics.

    Raises a one-line :class:`SqlnbError` when a table is missing, or holds a class the
    model does not have (a new class: fit a new model, generate the package again).
    """
    check_trainable(model)
    engine = as_engine(con)
    where = f"{schema + '.' if schema else ''}{name}_*"
    class_rows = [r for r in _read(engine, schema, f"{name}_classes", ["class", "n", "rows"]) if r[0] is not None]
    if not class_rows:
        raise SqlnbError(f"the dbt table {name}_classes holds no class; run dbt build over labelled rows first")
    unknown = [r[0] for r in class_rows if r[0] not in model.classes]
    if unknown:
        raise SqlnbError(f"the dbt tables {where} count class {unknown[0]!r}, which model {model.name!r} does not "
                         "have; fit a model on rows with that class and generate the package again")
    classes = sorted_values(r[0] for r in class_rows)
    pos = {c: i for i, c in enumerate(classes)}
    K = len(classes)
    got = {r[0]: r for r in class_rows}
    class_n = np.array([float(got[c][1]) for c in classes])
    class_rows_ = np.array([float(got[c][2]) for c in classes])
    feats: dict[str, Any] = {}
    parts = _parts(model)
    long = {part: _read(engine, schema, f"{name}_{part}", ["class", "feature", *_values(part)])
            for part in ("moments", "sums") if part in parts}
    for j, f in enumerate(model.features):
        if f.kind in COUNTED:
            rows = _read(engine, schema, f"{name}_counts_{j}", ["class", "value", "n"])
            # a binned column's every bin, also one no row fell in (families/binned.py)
            values = list(range(len(f.edges) + 1)) if f.kind == "binned" else sorted_values(r[1] for r in rows)
            at = {v: i for i, v in enumerate(values)}
            counts = np.zeros((K, len(values)))
            for c, v, n in rows:
                counts[pos[c], at[v]] += float(n)
            feats[f.name] = Counts(values, counts)
            continue
        part = "moments" if f.kind == "gaussian" else "sums"
        arr = np.zeros((len(_values(part)), K))
        for r in long[part]:
            if r[1] == f.name and r[0] in pos:
                arr[:, pos[r[0]]] = [float(v) for v in r[2:]]
        feats[f.name] = (Moments(*arr, *(a.copy() for a in arr)) if part == "moments" else Sums(*arr))
    pairs = None
    if "pairs" in parts:  # the pair counts' text values, mapped back as the engine casts the categories
        texts = {}
        for j, f in enumerate(model.features):
            if f in parts["pairs"] and f.kind == "categorical":
                query = exp.select(sql.col("value"), exp.Cast(this=sql.col("value"), to=exp.DataType.build("varchar")))
                texts[f.name] = {t: v for v, t in engine.execute(query.from_(sql.table(f"{name}_counts_{j}", schema)))}
        pairs = dbt_structures.import_pairs(
            model, lambda part, columns: _read(engine, schema, f"{name}_{part}", columns), classes, texts)
    cuts = (dbt_cuts.import_values(model, _read(engine, schema, f"{name}_values", list(dbt_cuts.KEYS) + ["n"]),
                                   classes) if "values" in parts else {})
    stats = Statistics(classes, class_n, class_rows_, {f.name: feats[f.name] for f in model.features}, 0,
                       pairs=pairs, cuts=cuts)
    report = {k: v for k, v in model.report.items() if k not in ("updates", "last_update", "batches", "novelty")}
    report.update(source=f"dbt tables {where}", rows=stats.n_rows, null_label_rows=0)
    return model.rebuilt(stats=stats, report=report)
