"""A dbt package from a stored model: the scoring SELECT as a macro for each adapter.

dbt is where analysts' pipelines run, and its own runner is where a generated package is
tested (tests/test_dbt.py runs ``dbt build`` on DuckDB and PostgreSQL). The package is
named ``sqlnb_<name>`` and holds:

``macros/score_<name>.sql``
    ``score_<name>(relation, columns=none)``: the scoring SELECT over ``relation`` (a
    ``ref()``, a ``source()``), passing ``columns`` through (default: every column of the
    relation), for the active adapter by ``adapter.dispatch``. Each adapter's SQL
    (``duckdb__``, ``postgres__``, ``spark__``) is :meth:`Model.scoring_query` rendered by
    :func:`sqlnb.sql.render`; the two places dbt fills in (the relation, the passed-through
    columns) are nodes of the tree holding Jinja, so nothing is pasted into SQL text.
``macros/tests_<name>.sql``
    generic tests: ``sqlnb_<name>_probabilities`` (every ``proba_*`` in [0, 1], their sum
    1 within 1e-9) and ``sqlnb_<name>_fingerprint`` (the model stored under its name in
    the warehouse's ``sqlnb.models`` still has the fingerprint this package was made from:
    :func:`sqlnb.store.catalog.fingerprint`; after a refit the test fails until the
    package is generated again).
``models/<name>_scored.sql``, ``models/schema.yml``, ``models/<name>.md``
    an example model scoring the source ``sqlnb_<name>.input`` (enabled by the var
    ``sqlnb_<name>_example``, so that installing the package builds nothing by itself),
    its tests (prediction not null and among the classes, the probabilities, the
    fingerprint) and a docs block describing the model.

:func:`project_files` adds a runnable project around the package (``dbt_project.yml``,
a DuckDB ``profiles.yml``, the source over a named table); the package then sits in
the project's ``dbt_packages/``, where dbt loads it without ``dbt deps``.

Every file is a function of the model alone (no timestamps, sorted keys), so generating
again after a refit rewrites only the files whose content changed (:func:`write_files`).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.finish import DEFAULT_OUTPUTS, class_columns
from sqlnb.store import CATALOG, SCHEMA
from sqlnb.workflows.report import describe

#: The adapters a package renders SQL for (dbt's ``target.type``), each with sqlnb's
#: dialect: the ones whose scoring SQL sqlnb's tests run.
ADAPTERS = {"duckdb": "duckdb", "postgres": "postgres", "spark": "spark"}

#: What the scoring macro outputs, as ``sqlnb sql`` does by default.
OUTPUTS = DEFAULT_OUTPUTS

#: dbt names a package and its macros with these (lower case: dbt's project names).
NAME = re.compile(r"^[a-z_][a-z0-9_]*$")

#: dbt versions the generated files are written for (the extra ``dbt`` in pyproject.toml).
DBT_VERSIONS = '[">=1.10.0", "<2.0.0"]'

_KEEP = "__sqlnb_columns__"  # the passed-through columns' place in the tree, until dbt fills it


def package_name(model: Any, name: str | None = None) -> str:
    """The name the package's files use (``sqlnb_<name>``, ``score_<name>``): ``name``, or
    the model's own name when it is one dbt accepts."""
    given = name if name is not None else getattr(model, "name", None) or ""
    if not NAME.match(given):
        what = "--name" if name is not None else f"model name {given!r}"
        raise SqlnbError(f"{what} is not a dbt name (lower-case letters, digits and _, not starting with a digit); "
                         "give --name NAME, e.g. --name churn")
    return given


def _jinja(text: str) -> exp.Var:
    """A node rendered as ``text`` as it is: where dbt's Jinja fills in the SQL."""
    return exp.Var(this=text)


def _ref(name: str, alias: str | None = None) -> exp.Table:
    t = exp.Table(this=_jinja(f"{{{{ ref('{name}') }}}}"))
    if alias:
        t.set("alias", exp.TableAlias(this=sql.ident(alias)))
    return t


def _ln_ratio(num: exp.Expression, den: exp.Expression) -> exp.Expression:
    """``ln(num) − ln(den)``; −inf when ``num`` is 0 (a zero probability), NULL when a
    side is negative (no estimate) or ``den`` is 0 with ``num`` > 0."""
    return exp.Case(ifs=[exp.If(this=num.copy().eq(sql.dbl(0.0)), true=sql.dbl(-math.inf)),
                         exp.If(this=exp.and_(exp.GT(this=num.copy(), expression=sql.dbl(0.0)),
                                              exp.GT(this=den.copy(), expression=sql.dbl(0.0))),
                                true=exp.Sub(this=exp.Ln(this=num.copy()), expression=exp.Ln(this=den.copy())))])


def scoring_sql(model: Any, dialect: str) -> str:
    """The scoring SELECT of ``model`` for ``dialect``, over ``{{ relation }}`` aliased
    ``src``, passing through the columns named by the Jinja list ``columns``."""
    src = exp.Table(this=_jinja("{{ relation }}"), alias=exp.TableAlias(this=sql.ident("src")))
    return passed_through(model.scoring_query(None, OUTPUTS, keep=[_KEEP], source_from=src, dialect=dialect), dialect)


def passed_through(tree: exp.Select, dialect: str) -> str:
    """``tree`` (a scoring SELECT keeping the one column ``_KEEP``) rendered for
    ``dialect`` with that column replaced by a Jinja loop over the list ``columns``."""

    def fill(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name == _KEEP:
            one = exp.Column(this=_jinja("{{ adapter.quote(c) }}"), table=node.args.get("table"))
            return _jinja("{% for c in columns %}" + sql.render(one, dialect) + '{{ ", " if not loop.last }}'
                          "{% endfor %}")
        return node

    return sql.render(tree.transform(fill), dialect, pretty=True)


def reserved_columns(model: Any) -> list[str]:
    """Every name the scoring SELECT gives a column (lower case): a passed-through column
    of one of these names would clash, and the macro says so."""
    src = exp.Table(this=sql.ident("t"), alias=exp.TableAlias(this=sql.ident("src")))
    tree = model.scoring_query(None, OUTPUTS, keep=[_KEEP], source_from=src, dialect="duckdb")
    return sorted({a.alias.lower() for a in tree.find_all(exp.Alias)} - {""})


def output_columns(model: Any) -> list[str]:
    """The columns the macro adds after the passed-through ones, in order."""
    tree = model.scoring_query(None, OUTPUTS, keep=[], source_from=exp.Table(this=sql.ident("t")), dialect="duckdb")
    return [e.alias_or_name for e in tree.expressions]


def _literal_list(values: Sequence[Any]) -> str:
    return "[" + ", ".join(json.dumps(str(v)) for v in values) + "]"


def macros_file(model: Any, name: str) -> str:
    """``macros/score_<name>.sql``: the dispatching macro and one implementation per adapter."""
    ns = f"sqlnb_{name}"
    out = [f"{{# Generated by sqlnb dbt from model {json.dumps(str(model.name))} (fingerprint {model.fingerprint}); "
           "do not edit: generate it again. #}",
           "",
           f"{{% macro score_{name}(relation, columns=none) %}}",
           "  {#- The model's scores of every row of relation, with the columns passed through (default: all). -#}",
           "  {%- if columns is none -%}",
           "    {%- set columns = adapter.get_columns_in_relation(relation) | map(attribute='name') | list -%}",
           "  {%- endif -%}",
           f"  {{%- set reserved = {_literal_list(reserved_columns(model))} -%}}",
           "  {%- for c in columns if c | lower in reserved -%}",
           f"    {{{{ exceptions.raise_compiler_error('score_{name}: the column ' ~ c ~ ' of ' ~ relation ~ "
           "' has a name the scoring SELECT uses; leave it out of columns=[...]') }}",
           "  {%- endfor -%}",
           f"  {{{{ return(adapter.dispatch('score_{name}', '{ns}')(relation, columns)) }}}}",
           "{% endmacro %}",
           "",
           f"{{% macro default__score_{name}(relation, columns) %}}",
           f"  {{{{ exceptions.raise_compiler_error('score_{name}: sqlnb rendered this model for "
           f"{', '.join(ADAPTERS)}, not for ' ~ target.type) }}}}",
           "{% endmacro %}",
           "",
           f"{{% macro {ns}_fingerprint() %}}{model.fingerprint}{{% endmacro %}}"]
    for adapter, dialect in ADAPTERS.items():
        try:
            body = scoring_sql(model, dialect)
        except SqlnbError as e:  # e.g. token bags, scored with DuckDB's lists and maps only
            body = "  {{ exceptions.raise_compiler_error(" + json.dumps(f"score_{name}: {e}") + ") }}"
        out += ["", f"{{% macro {adapter}__score_{name}(relation, columns) %}}", body, "{% endmacro %}"]
    return "\n".join(out) + "\n"


def unsupported(model: Any) -> dict[str, str]:
    """Adapter -> why sqlnb cannot render ``model``'s scoring SELECT for it (its macro
    raises that at compile time instead)."""
    out = {}
    for adapter, dialect in ADAPTERS.items():
        try:
            model.check_dialect(dialect)
        except SqlnbError as e:
            out[adapter] = str(e)
    return out


def _probabilities_test(model: Any, name: str, dialect: str) -> str:
    """The rows of ``{{ model }}`` whose probabilities are not each in [0, 1] with a sum
    within 1e-9 of 1 (NULL counts as a failure: a row without a posterior)."""
    cols = [sql.col(c) for c in class_columns("proba_", model.classes)]
    ok = [exp.Between(this=c.copy(), low=sql.dbl(0.0), high=sql.dbl(1.0)) for c in cols]
    total = exp.Abs(this=exp.Sub(this=sql.add([c.copy() for c in cols]), expression=sql.dbl(1.0)))
    ok.append(exp.LTE(this=total, expression=sql.dbl(1e-9)))
    every = exp.and_(*ok)
    query = exp.select(exp.Star()).from_(exp.Table(this=_jinja("{{ model }}"))).where(
        exp.Not(this=exp.Coalesce(this=sql.paren(every), expressions=[exp.false()])))
    return sql.render(query, dialect, pretty=True)


def _fingerprint_test(model: Any, name: str, dialect: str) -> str:
    """One row when the warehouse's ``sqlnb.models`` holds no model of this name with
    this package's fingerprint (refitted, dropped, or stored elsewhere)."""
    # The store's catalog where dbt runs; the var sqlnb_catalog names another (e.g. an
    # attached DuckDB file's: models.sqlnb.models).
    default = sql.render(sql.table(CATALOG, SCHEMA), dialect)
    catalog = exp.Table(this=_jinja("{{ var('sqlnb_catalog', '" + default + "') }}"))
    marker = f'%"fingerprint": "{model.fingerprint}"%'
    found = exp.select(exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True)).from_(catalog).where(
        exp.and_(sql.col("name").eq(exp.Literal.string(model.name)),
                 exp.Like(this=sql.col("meta"), expression=exp.Literal.string(marker))))
    message = (f"model {model.name} changed since package sqlnb_{name} was generated "
               f"(fingerprint {model.fingerprint}); run sqlnb dbt again")
    query = exp.select(exp.alias_(exp.Literal.string(message), "problem", quoted=True)).from_(
        exp.Subquery(this=found, alias=exp.TableAlias(this=sql.ident("t")))).where(
        sql.col("n", "t").eq(exp.Literal.number(0)))
    return sql.render(query, dialect, pretty=True)


def tests_file(model: Any, name: str) -> str:
    """``macros/tests_<name>.sql``: the generic tests, per adapter where SQL differs."""
    ns = f"sqlnb_{name}"
    out = [f"{{# Generated by sqlnb dbt from model {json.dumps(str(model.name))}; do not edit. #}}"]
    for test, build in (("probabilities", _probabilities_test), ("fingerprint", _fingerprint_test)):
        out += ["", f"{{% test {ns}_{test}(model) %}}",
                f"  {{{{ return(adapter.dispatch('{ns}_{test}_sql', '{ns}')(model)) }}}}", "{% endtest %}"]
        for adapter, dialect in ADAPTERS.items():
            out += [f"{{% macro {adapter}__{ns}_{test}_sql(model) %}}", build(model, name, dialect), "{% endmacro %}"]
    return "\n".join(out) + "\n"


def _md_value(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (dict, list)) else str(v)


def docs_file(model: Any, name: str, metrics: Mapping[str, Any] | None = None) -> str:
    """``models/<name>.md``: the docs block ``sqlnb_<name>`` (what ``sqlnb show`` knows)."""
    d = describe(model)
    trained = d.get("trained") or {}
    lines = [f"{{% docs sqlnb_{name} %}}",
             f"Scores of the sqlnb model `{model.name}` ({d['kind']}), fingerprint `{model.fingerprint}`.",
             "",
             f"- label: `{d['label']}` ({d['label_type']}), classes: "
             + ", ".join(f"`{c['label']}` ({c['column']})" for c in d["classes"]),
             f"- trained on: {trained.get('rows', '?')} rows of {trained.get('source', '?')}, "
             f"created {d.get('created') or '?'} with sqlnb {(d.get('versions') or {}).get('sqlnb', '?')}",
             "- features: " + ", ".join(f"`{f['name']}` ({f['kind']}, {f['type']})" for f in d["features"]),
             "- hyperparameters: " + ", ".join(f"{k}={_md_value(v)}" for k, v in sorted(d["hyperparameters"].items()))]
    if model.decision is not None and not model.decision.is_default:
        lines.append(f"- decision rule: {model.decision.describe()}")
    if d.get("calibration"):
        lines.append(f"- calibration: {_md_value(d['calibration'])}")
    if metrics:
        lines.append("- metrics (sqlnb evaluate): " + ", ".join(f"{k}={_md_value(v)}" for k, v in metrics.items()))
    else:
        lines.append("- metrics: not evaluated (sqlnb dbt --evaluate DATA adds them)")
    lines += ["", f"Generated by `sqlnb dbt`; when the model is refitted the test `sqlnb_{name}_fingerprint` fails "
              "until the package is generated again.", "{% enddocs %}"]
    return "\n".join(lines) + "\n"


def _yaml(value: Any) -> str:
    """A YAML scalar: JSON's syntax for strings and numbers is YAML's too."""
    return json.dumps(value)


def schema_file(model: Any, name: str) -> str:
    """``models/schema.yml``: the example model, its columns and tests."""
    ns = f"sqlnb_{name}"
    lines = ["version: 2", "", "models:", f"  - name: {name}_scored",
             f"    description: '{{{{ doc(\"{ns}\") }}}}'",
             "    data_tests:", f"      - {ns}_probabilities", f"      - {ns}_fingerprint",
             "    columns:"]
    for col in output_columns(model):
        lines.append(f"      - name: {_yaml(col)}")
        if col == "prediction":
            numbers = all(isinstance(c, (int, float)) for c in model.classes)  # bool is an int
            values = [c if numbers else str(c) for c in model.classes]
            rejects = model.decision is not None and model.decision.reject is not None
            lines += ["        description: the predicted class" + (" (NULL: rejected)" if rejects else ""),
                      "        data_tests:"]
            if not rejects:  # a reject option leaves rejected rows without a prediction
                lines.append("          - not_null")
            lines += ["          - accepted_values:", "              arguments:",
                      "                values: [" + ", ".join(_yaml(v) for v in values) + "]"]
            if numbers:
                lines.append("                quote: false")
        elif col.startswith("proba_"):
            lines.append("        description: p(class | row)")
    return "\n".join(lines) + "\n"


def example_model(name: str) -> str:
    ns = f"sqlnb_{name}"
    return (f"{{{{ config(materialized='table', enabled=var('{ns}_example', false)) }}}}\n"
            f"{{{{ {ns}.score_{name}(source('{ns}', 'input')) }}}}\n")


def package_files(model: Any, name: str, metrics: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Relative path -> content of the package ``sqlnb_<name>`` for ``model`` (a stored
    model: it has a ``fingerprint``)."""
    if not getattr(model, "fingerprint", None):
        raise SqlnbError(f"model {getattr(model, 'name', '?')!r} was saved by an sqlnb that recorded no fingerprint; "
                         "save it again (sqlnb fit --replace) so that the package can check it is current")
    ns = f"sqlnb_{name}"
    project = "\n".join([f"name: {ns}", 'version: "1.0.0"', "config-version: 2",
                         f"require-dbt-version: {DBT_VERSIONS}", 'macro-paths: ["macros"]', 'model-paths: ["models"]',
                         ""])
    return {"dbt_project.yml": project,
            f"macros/score_{name}.sql": macros_file(model, name),
            f"macros/tests_{name}.sql": tests_file(model, name),
            f"models/{name}_scored.sql": example_model(name),
            "models/schema.yml": schema_file(model, name),
            f"models/{name}.md": docs_file(model, name, metrics)}


def project_files(model: Any, name: str, database: str, table: str, schema: str | None = None,
                  metrics: Mapping[str, Any] | None = None) -> dict[str, str]:
    """A runnable project around the package: ``dbt build`` in it scores ``schema.table``
    of the DuckDB file ``database`` into the table ``<name>_scored`` (the package under
    ``dbt_packages/sqlnb_<name>``). Without ``schema`` the source is in the target's
    schema (DuckDB's ``main``; the same project then runs on another target too)."""
    ns = f"sqlnb_{name}"
    files = {f"dbt_packages/{ns}/{path}": text for path, text in package_files(model, name, metrics).items()}
    files["dbt_project.yml"] = "\n".join([
        f"name: {ns}_example", 'version: "1.0.0"', "config-version: 2", f"profile: {ns}_example",
        f"require-dbt-version: {DBT_VERSIONS}", 'model-paths: ["models"]',
        f"# dbt_packages/{ns} is the generated package; dbt loads it without dbt deps, and dbt clean keeps it.",
        'clean-targets: ["target"]', "vars:", f"  {ns}_example: true", ""])
    files["profiles.yml"] = "\n".join([
        f"{ns}_example:", "  target: duckdb", "  outputs:", "    duckdb:", "      type: duckdb",
        f"      path: {_yaml(os.path.abspath(database))}", "      threads: 1", ""])
    files["models/sources.yml"] = "\n".join([
        "version: 2", "", "sources:", f"  - name: {ns}", f"    schema: {_yaml(schema or '{{ target.schema }}')}", "    tables:",
        "      - name: input", f"        identifier: {_yaml(table)}", ""])
    return files


def write_files(root: str | os.PathLike, files: Mapping[str, str]) -> list[tuple[str, bool]]:
    """Write ``files`` under ``root``, each only when its content differs from what is
    there (so a file whose content did not change keeps its time stamp). Returns
    ``(path, written)`` per file, in path order."""
    base = Path(root)
    if base.exists() and not base.is_dir():
        raise SqlnbError(f"--out {str(root)!r} is a file; give a directory")
    out = []
    for rel in sorted(files):
        path = base / rel
        text = files[rel]
        if path.is_file() and path.read_text() == text:
            out.append((rel, False))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # never a half-written file in the package
        out.append((rel, True))
    return out
