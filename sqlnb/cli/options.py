"""The options several commands share, each declared once as a decorator (how DATA is read,
``--model``, ``--out``, ``--replace``, ``--label``, the feature, kind and text options,
...), and the parsers that turn option values into library arguments (column lists,
``NAME=VALUE`` items, class priors, thresholds, text and kind parameters, DATA and MODEL
locations).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import click
import sqlglot

from sqlnb.cli.app import Settings
from sqlnb.errors import SqlnbError, suggest
from sqlnb.io.locations import DbObject, Reading, parse_data, parse_model, split_db
from sqlnb.models.finish import DEFAULT_OUTPUTS, OUTPUTS
from sqlnb.models.naive_bayes import eskdb
from sqlnb.models.naive_bayes.families import KINDS
from sqlnb.models.naive_bayes.hyperparameters import ESTIMATORS, UNSEEN
from sqlnb.models.naive_bayes.tan import STRUCTURES

#: The model kinds other than naive Bayes, chosen with ``--kind``.
DENSE_KINDS = ("lda", "qda", "logistic")
#: Naive Bayes with discriminatively learnt weights (:mod:`sqlnb.models.naive_bayes.weighted`):
#: naive Bayes's options apply to it too.
WEIGHTED = "weighted"

#: Options that apply to one model kind only (the option, its parameter, the kinds).
KIND_OPTIONS = {"--shrinkage": ("shrinkage", ("lda",)), "--reg-param": ("reg_param", ("qda",)),
                "--C": ("C", ("logistic",)), "--standardize": ("standardize", ("logistic",)),
                "--l2": ("l2", (WEIGHTED,))}


# -- parsing option values --------------------------------------------------------------------

def split_list(values: tuple[str, ...]) -> list[str] | None:
    """Repeated and/or comma-separated names; None when the option was not given.

    As in CSV, a name that holds a comma, or leading or trailing spaces, is written in
    double quotes, with ``""`` for a quote inside them: ``--features 'a,"b,c"'`` gives
    ``a`` and ``b,c``. Unquoted names are stripped; a quote inside one is just a character
    (``a"b`` is ``a"b``).
    """
    if not values:
        return None
    return [name for v in values for name in _split_names(v)]


def _split_names(text: str) -> list[str]:
    out: list[str] = []
    i, n = 0, len(text)
    while i <= n:
        while i < n and text[i] == " ":
            i += 1
        if i < n and text[i] == '"':
            name, k = _quoted(text, i, f"unterminated quote in the column list {text!r}; close it, e.g. '\"b,c\"'")
            i = k + 1
            while i < n and text[i] == " ":
                i += 1
            if i < n and text[i] != ",":
                raise SqlnbError(f"text after a quoted name in the column list {text!r}; "
                                 "separate names with commas")
            out.append(name)
        else:
            k = text.find(",", i)
            k = n if k < 0 else k
            if text[i:k].strip():
                out.append(text[i:k].strip())
            i = k
        i += 1
    return out


def _quoted(text: str, i: int, unterminated: str) -> tuple[str, int]:
    """The double-quoted name opening at ``text[i]`` (``""`` is a quote inside it) and
    the index of its closing quote."""
    j, parts = i + 1, []
    while True:
        k = text.find('"', j)
        if k < 0:
            raise SqlnbError(unterminated)
        parts.append(text[j:k])
        if not text.startswith('""', k):
            return "".join(parts), k
        parts.append('"')
        j = k + 2


def keep_columns(keep: tuple[str, ...]) -> list[str] | None:
    """--keep: the columns to keep; ``--keep ''`` keeps none, no --keep keeps all (None)."""
    return [] if keep == ("",) else split_list(keep)


def score_outputs(no_proba: bool, outputs: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What scoring writes: --outputs GROUP,... (groups of :data:`~sqlnb.models.finish.OUTPUTS`,
    repeatable and/or comma-separated), else the prediction and, unless --no-proba, the
    probabilities. The columns come out in one order whatever the order given (see
    :func:`~sqlnb.models.finish.output_columns`)."""
    if not outputs:
        return ("prediction",) if no_proba else DEFAULT_OUTPUTS
    if no_proba:
        raise SqlnbError("--no-proba and --outputs both choose the output columns; give one "
                         "(--outputs prediction is --no-proba)")
    names = [n.strip() for text in outputs for n in text.split(",")]
    if not any(names):
        raise SqlnbError(f"--outputs needs at least one of: {', '.join(OUTPUTS)}")
    for name in names:
        if name not in OUTPUTS:
            raise SqlnbError(f"--outputs: unknown output {name!r}{suggest(name, OUTPUTS)}; "
                             f"choose from: {', '.join(OUTPUTS)}")
    return tuple(dict.fromkeys(names))


def parse_backoff(text: str | None) -> float | str | None:
    """``--backoff``: a number, or ``loo`` (checked with the other hyperparameters)."""
    try:
        return None if text is None else float(text)
    except ValueError:
        return text


def assignments(values: tuple[str, ...] | list[str], option: str, convert: Callable[[str], Any] = str) -> dict:
    """``NAME=VALUE`` items, repeated and/or comma-separated: ``a=x,b=y`` is ``a=x`` and ``b=y``.

    An unquoted name is split from its value at the last ``=`` (so it may hold ``=``); a
    name holding a comma, or leading or trailing spaces, is written in double quotes, as in
    the column lists: ``'"a,b"=categorical'`` (``""`` for a quote inside them).
    """
    out = {}
    for text in values:
        for name, value in _split_assignments(text, option):
            try:
                out[name] = convert(value)
            except ValueError:
                raise SqlnbError(f"{option} {name}={value}: {value!r} is not a number") from None
    return out


def _split_assignments(text: str, option: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] == " ":
            i += 1
        if i < n and text[i] == '"':  # a quoted name, then =VALUE
            name, k = _quoted(text, i, f"{option}: unterminated quote in {text!r}; close it, e.g. '\"a,b\"=VALUE'")
            if not text.startswith("=", k + 1):
                raise SqlnbError(f"{option} takes NAME=VALUE; after the quoted name {name!r} "
                                 f"comes {text[k + 1:k + 2] or 'nothing'!r}, not '='")
            end = text.find(",", k + 2)
            end = n if end < 0 else end
            value = text[k + 2:end].strip()
        else:
            end = text.find(",", i)
            end = n if end < 0 else end
            item = text[i:end].strip()
            name, eq, value = item.rpartition("=")
            name = name.strip()
            if not eq or not name:
                hint = " (a name holding a comma goes in double quotes)" if "," in text else ""
                raise SqlnbError(f"{option} takes NAME=VALUE, not {item!r}{hint}")
        if not value.strip():
            raise SqlnbError(f"{option} {name!r} has no value; write {name}=VALUE")
        out.append((name, value.strip()))
        i = end + 1
    return out


def parse_class_prior(text: str | None) -> Any:
    if text is None or text in ("fitted", "uniform", "dirichlet"):
        return text
    if "=" not in text:
        raise SqlnbError(f"--class-prior must be fitted, uniform, dirichlet or LABEL=P,..., not {text!r}"
                         f"{suggest(text, ('fitted', 'uniform', 'dirichlet'))}")
    return assignments([text], "--class-prior", float)


def parse_prior_alpha(text: str | None) -> Any:
    """``--prior-alpha A`` (every class) or ``--prior-alpha LABEL=A,...`` (per class; a class
    left out takes 1, labels matched by their text against the model's classes at fit)."""
    if text is None or _is_number(text):
        return None if text is None else float(text)
    if "=" not in text:
        raise SqlnbError(f"--prior-alpha takes a number or LABEL=A,... (e.g. --prior-alpha yes=5,no=1), not {text!r}")
    return assignments([text], "--prior-alpha", float)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_binarize(values: tuple[str, ...]) -> float | dict:
    """``--binarize T`` for every bernoulli column, or ``--binarize COL=T`` per column."""
    if not values:
        return 0.0
    if len(values) == 1 and _is_number(values[0]):
        return float(values[0])
    if any(_is_number(v) for v in values):
        raise SqlnbError("--binarize takes one threshold for all columns or COL=T per column, not both")
    return assignments(values, "--binarize", float)


def parse_bins(values: tuple[str, ...]) -> str | dict | None:
    """``--bins mdl|quantile:K`` (every numeric column) and/or ``--bins COL=mdl|COL=quantile:K``
    (one column), repeatable: the ``bins=`` of :func:`sqlnb.fit` (a mapping whose key None
    is the spec of every other numeric column)."""
    if not values:
        return None
    every = [v.strip() for v in values if "=" not in v]
    if len(every) > 1:
        raise SqlnbError(f"--bins names two discretisations for every numeric column ({every[0]} and {every[1]}); "
                         "give one, and COL=SPEC for the columns that differ")
    per = assignments([v for v in values if "=" in v], "--bins")
    if not per:
        return every[0]
    return per | ({None: every[0]} if every else {})


bins_option = click.option(
    "--bins", multiple=True, metavar="mdl|quantile:K|COL=SPEC",
    help="Discretise numeric columns (kind binned): mdl (Fayyad & Irani entropy splits) or quantile:K "
         "(K equal-frequency bins); alone for every numeric column, COL=SPEC for one (repeatable).")


def feature_plan_args(kind, feature_kind, features, exclude, weight, binarize_values) -> dict:
    """The feature plan of naive Bayes (``kind=``, ``features=``, ...) from the feature options."""
    return {"kind": kind, "feature_kinds": assignments(feature_kind, "--feature-kind"),
            "features": split_list(features), "exclude": split_list(exclude), "weight": weight,
            "binarize": parse_binarize(binarize_values)}


def csv_read_options(delimiter: str | None, null_string: tuple[str, ...], header: bool | None,
                     names: tuple[str, ...] = ()) -> dict:
    """DuckDB ``read_csv`` parameters from the CSV options (values become literals).

    ``--null-string`` adds to the default, an empty cell: ``--null-string NA`` reads both
    ``NA`` and empty cells as NULL (DuckDB's ``nullstr`` alone would replace the default
    and turn empty cells into text). ``--names a,b,c`` names the columns of a file without
    a header (the first line is a row unless ``--header`` is given too, which then renames
    the header's columns); ``--columns`` applies to those names."""
    opts: dict[str, Any] = {}
    if delimiter is not None:
        opts["delim"] = delimiter
    if null_string:
        opts["nullstr"] = list(dict.fromkeys(("", *null_string)))
    listed = split_list(names)
    if listed == []:
        raise SqlnbError("--names takes the names of the CSV columns, in order, e.g. --names a,b,label")
    if listed is not None:
        opts["names"] = listed
        if header is None:
            header = False
    if header is not None:
        opts["header"] = header
    return opts


def parse_columns(values: tuple[str, ...]) -> dict[str, str]:
    """``--columns 'col=TYPE,...'``: DuckDB types, checked here so a typo is named at once."""
    types = assignments(values, "--columns")
    for name, text in types.items():
        try:
            sqlglot.exp.DataType.build(text, dialect="duckdb")
        except (sqlglot.errors.ParseError, ValueError):
            raise SqlnbError(f"--columns {name}={text}: {text!r} is not a type; use one DuckDB knows, "
                             "e.g. VARCHAR, BIGINT, DOUBLE, BOOLEAN, DATE") from None
    return types


def _df(text: str | None, option: str) -> float | int | None:
    """--min-df/--max-df: an integer is a document count, a decimal a share."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise SqlnbError(f"{option} takes a document count or a share in [0, 1], not {text!r}") from None


def text_args(token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, select_k) -> dict | None:
    """The ``text=`` options of token bags from the text flags (None when none is given)."""
    words = None
    if stop_words is not None:
        if stop_words.startswith("@"):
            with open(stop_words[1:], encoding="utf-8-sig") as f:  # a byte-order mark is not a word
                words = [w.strip() for w in f if w.strip()]
        else:
            words = split_list((stop_words,)) or []
    opts = {"token_pattern": token_pattern, "lowercase": False if no_lowercase else None, "stop_words": words,
            "min_df": _df(min_df, "--min-df"), "max_df": _df(max_df, "--max-df"),
            "max_features": max_features, "select_k": select_k}
    opts = {k: v for k, v in opts.items() if v is not None}
    return opts or None


def model_kind_args(kind: str, given: dict[str, Any]) -> tuple[str, dict]:
    """(model kind, its parameters) from --kind and the kind-specific options; an option
    given for another kind is an error. ``given`` maps option names to values (None: not given)."""
    model = kind if kind in (*DENSE_KINDS, WEIGHTED) else "naive_bayes"
    params = {}
    for option, value in given.items():
        if value is None:
            continue
        name, kinds = KIND_OPTIONS.get(option, (None, ("naive_bayes", WEIGHTED)))
        if model not in kinds:
            for_kind = "naive Bayes" if "naive_bayes" in kinds else "--kind " + "|".join(kinds)
            raise SqlnbError(f"{option} applies to {for_kind} only, not to --kind {kind}")
        if name is not None:
            params[name] = value
    return model, params


def model_location(settings: Settings, text: str) -> DbObject | str:
    """A MODEL argument: ``DB.duckdb:NAME``, or with a warehouse engine a plain NAME."""
    if settings.remote:
        if split_db(text) is not None or not text:
            raise SqlnbError(f"with --engine {settings.engine}, MODEL is a model NAME on the engine, not {text!r}")
        return text
    return parse_model(text)


def data_spec(settings: Settings, text: str, reading: Reading) -> Any:
    """A DATA argument: parsed for DuckDB, or as is (a table name or SELECT) for a warehouse."""
    if not settings.remote:
        return parse_data(text, reading)
    if reading:
        raise SqlnbError(f"reading options (--data-format, --columns and the CSV ones) apply to files read by "
                         f"DuckDB, not to --engine {settings.engine}")
    return text


# -- the shared options -------------------------------------------------------------------------

def _options(*decorators):
    """One decorator applying ``decorators`` in the order given (as they would be stacked)."""
    def apply(f):
        for d in reversed(decorators):
            f = d(f)
        return f
    return apply


def model_option(help: str = "The model: a name in a DuckDB database file.", required: bool = True):
    """--model/-m MODEL."""
    return click.option("--model", "-m", "model", metavar="DB.duckdb:NAME", required=required, help=help)


def label_option(help: str, required: bool = True):
    """--label/-y COL."""
    return click.option("--label", "-y", required=required, metavar="COL", help=help)


def out_option(required: bool = True):
    """--out/-o OUT: a file, a DuckDB table or - for stdout (when not ``required``, the
    command's default: it writes CSV to stdout without --out)."""
    return click.option("--out", "-o", required=required, metavar="OUT",
                        help="file.parquet, file.csv, file.json, DB.duckdb:TABLE, or - for CSV on stdout"
                             + ("." if required else " (the default)."))


def seed_option(help: str, default: int | None = None):
    """--seed N (its default shown when there is one)."""
    return click.option("--seed", type=int, default=default, show_default=default is not None, help=help)


def alpha_option(help: str):
    """--alpha A: the pseudo-count of discrete features."""
    return click.option("--alpha", type=float, help=help)


def keep_option(help: str):
    """--keep COL,...: input columns to carry into the scored rows (see :func:`keep_columns`)."""
    return click.option("--keep", multiple=True, metavar="COL,...", help=help)


def kind_option(help: str = "Family of every feature; auto: numbers gaussian, booleans bernoulli, text categorical.",
                choices: Sequence[str] = ("auto", *KINDS), default: str = "auto"):
    """--kind: the naive Bayes family of every feature (or, with more ``choices``, the model kind)."""
    return click.option("--kind", type=click.Choice(list(choices)), default=default, show_default=True, help=help)


def features_options(help: str):
    """--features COL,... and --exclude COL,..."""
    return _options(
        click.option("--features", multiple=True, metavar="COL,...", help=help),
        click.option("--exclude", multiple=True, metavar="COL,...", help="Columns that are not features."),
    )


keep_columns_option = click.option(
    "--keep-columns", multiple=True, metavar="COL,...",
    help="Keep these columns although screening would leave them out (IDs, constants, near-unique categories).")
replace_option = click.option("--replace", is_flag=True, help="Overwrite an existing model or output.")
format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                             show_default=True, help="Output format.")
no_proba_option = click.option("--no-proba", is_flag=True, help="Only the prediction, no proba_<class> columns.")
outputs_option = click.option(
    "--outputs", multiple=True, metavar="GROUP,...",
    help="The scores to write, any of proba, prediction, jll (ln p(x, class) per class), log_proba, "
         "log_evidence (ln p(x)) [default: proba,prediction].")
set_format_option = click.option(
    "--set-format", type=click.Choice(["list", "flags"]), default=None,
    help="How a model's conformal sets come out: list (prediction_set, a LIST of classes: DuckDB's default) or "
         "flags (in_set_<class>, one BOOLEAN per class: the default in other dialects; in DuckDB far cheaper "
         "to write to Parquet than the list); set_size either way. See docs/conformal.md.")
model_kind_option = kind_option(
    "Naive Bayes family of every feature (auto: numbers gaussian, booleans bernoulli, text categorical), "
    "or the model kind weighted (naive Bayes with discriminatively learnt weights, numeric columns binned), "
    "lda, qda or logistic.", choices=("auto", *KINDS, WEIGHTED, *DENSE_KINDS))
column_options = _options(
    click.option("--feature-kind", multiple=True, metavar="COL=KIND",
                 help="Family of columns: COL=KIND, repeatable or comma-separated (a=categorical,b=bernoulli)."),
    features_options("Feature columns (default: all but label and weight)."),
    click.option("--weight", metavar="COL", help="Column of non-negative row weights."),
    click.option("--binarize", multiple=True, metavar="T|COL=T",
                 help="Bernoulli threshold: present when x > T (default 0)."),
)
feature_options = _options(kind_option(), column_options)
text_options = _options(
    click.option("--token-pattern", metavar="RE", help="Text bags: RE2 pattern of a token."),
    click.option("--no-lowercase", is_flag=True, default=None, help="Text bags: keep case."),
    click.option("--stop-words", metavar="W1,W2|@FILE", help="Text bags: words to drop (a list, or one per line in FILE)."),
    click.option("--min-df", metavar="N|F", help="Text bags: keep terms in >= N documents (or a share F in [0, 1])."),
    click.option("--max-df", metavar="N|F", help="Text bags: keep terms in <= N documents (or a share F)."),
    click.option("--max-features", type=click.IntRange(min=1), metavar="N", help="Text bags: keep the N most frequent terms."),
    click.option("--select-k", type=click.IntRange(min=1), metavar="K",
                 help="Keep the K features (columns or bag terms) of highest mutual information with the class."),
)
#: --shrinkage and --reg-param: of fit and cv (--kind lda|qda) and of compare (its LDA and QDA).
shrinkage_option = click.option("--shrinkage", type=click.FloatRange(0, 1), metavar="F",
                                help="LDA: covariance shrinkage, F in [0, 1] (default: none).")
reg_param_option = click.option("--reg-param", type=click.FloatRange(0, 1), metavar="F",
                                help="QDA: covariance regularisation, F in [0, 1] (default 0).")
kind_options = _options(
    shrinkage_option,
    reg_param_option,
    click.option("--C", "C", type=click.FloatRange(min=0, min_open=True), metavar="F",
                 help="--kind logistic: inverse L2 penalty (default 1)."),
    click.option("--standardize", is_flag=True, default=None, help="--kind logistic: fit on standardised features."),
    click.option("--l2", "l2", type=click.FloatRange(min=0, min_open=True), metavar="F",
                 help="--kind weighted: L2 penalty of the weights towards 1 (naive Bayes) (default: chosen by "
                      "5-fold cross-validation on the training rows)."),
)
_source_flags = _options(
    click.option("--data-format", "data_format", type=click.Choice(["csv", "parquet", "json"]),
                 help="Read DATA files as this format whatever their names (e.g. adult.data)."),
    click.option("--columns", "--types", "column_types", multiple=True, metavar="COL=TYPE,...",
                 help="Read these columns of CSV/JSON DATA with these DuckDB types (e.g. 'zip=VARCHAR,y=VARCHAR')."),
    click.option("--delimiter", metavar="TEXT", help="CSV field delimiter (default: detected), e.g. ', ' or '\\t'."),
    click.option("--null-string", multiple=True, metavar="TEXT",
                 help="CSV text read as NULL besides empty cells, e.g. '?' (repeatable)."),
    click.option("--header/--no-header", default=None, help="Whether CSV files have a header row (default: detected)."),
    click.option("--names", multiple=True, metavar="COL,...",
                 help="Names of the CSV columns, in order, for a file without a header (its first line is then a "
                      "row); --columns types them by these names."),
    click.option("--database", metavar="FILE.duckdb",
                 help="A DuckDB file whose tables and views a query as DATA reads by name (attached read-only; "
                      "default: MODEL's file when it exists)."),
)


def source_options(command: Callable) -> Callable:
    """How every command that reads DATA reads it: --format, --columns, and the CSV
    options --delimiter, --null-string, --header/--no-header and --names, and --database (the
    DuckDB file whose tables a query as DATA reads; by default MODEL's). The command receives
    them as one ``reading`` argument, a :class:`~sqlnb.io.locations.Reading` (false when
    none is given). DATA itself may be files, ``-`` (CSV on standard input), a SQL query
    or ``DB.duckdb:TABLE`` (:func:`~sqlnb.io.locations.parse_data`)."""
    @functools.wraps(command)
    def with_reading(*args, data_format, column_types, delimiter, null_string, header, names, database, **kwargs):
        # The command's Settings (pass_obj adds it inside this wrapper, so it is the context's).
        obj = click.get_current_context().obj
        settings = obj if isinstance(obj, Settings) else None
        default = database is None
        if default:
            database = _model_database(settings, kwargs.get("model"))
        elif not database:
            raise SqlnbError("--database takes a DuckDB file whose tables a query as DATA reads, e.g. --database lake.duckdb")
        elif settings is not None and settings.remote:
            raise SqlnbError(f"--database names a DuckDB file; with --engine {settings.engine} a query reads "
                             "the engine's tables")
        reading = Reading(data_format, parse_columns(column_types),
                          csv_read_options(delimiter, null_string, header, names),
                          database=database, database_default=default)
        return command(*args, reading=reading, **kwargs)
    return _source_flags(with_reading)


def _model_database(settings: Settings | None, model: Any) -> str | None:
    """The database file of a MODEL ``DB.duckdb:NAME`` that exists: the tables a query as
    DATA reads by name when --database is not given (None with a warehouse engine)."""
    if not isinstance(model, str) or settings is None or settings.remote:
        return None
    obj = split_db(model)
    return obj.db if obj is not None and obj.db and os.path.isfile(obj.db) else None


# -- the model options of fit, cv and select ------------------------------------------------------

def parse_beta(text: str | None) -> tuple[float, float] | None:
    """``--beta B1,B0`` as a pair of numbers (checked further by the model)."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 2:
        raise SqlnbError(f"--beta takes two numbers B1,B0 (e.g. --beta 2,1), not {text!r}")
    return values


@dataclass(frozen=True)
class FitOptions:
    """What fit's model options ask for: the model kind (``naive_bayes``, ``lda``, ``qda``
    or ``logistic``) and the keyword arguments of :func:`sqlnb.fit` for it."""

    model: str
    params: dict


_fit_flags = _options(
    model_kind_option,
    column_options,
    alpha_option("Pseudo-count of discrete features (default 1: Laplace)."),
    click.option("--feature-alpha", multiple=True, metavar="COL=A",
                 help="Pseudo-count of columns: COL=A, repeatable or comma-separated."),
    click.option("--beta", metavar="B1,B0", help="Beta(B1, B0) prior of Bernoulli features: pseudo-counts of a "
                 "present and of an absent value (default: --alpha for both)."),
    click.option("--estimator", type=click.Choice(ESTIMATORS), help="posterior-mean (default), map or mle."),
    click.option("--var-smoothing", type=float,
                 help="Gaussian variance floor, fraction of the largest variance (1e-9)."),
    click.option("--class-prior", metavar="fitted|uniform|dirichlet|LABEL=P,...", help="Class prior (default fitted)."),
    click.option("--prior-alpha", metavar="A|LABEL=A,...",
                 help="Concentration of the dirichlet class prior (implies --class-prior dirichlet): one A, or A "
                      "per class, e.g. --prior-alpha yes=5,no=2 (a class left out takes 1; default 1)."),
    click.option("--norm", is_flag=True, default=None, help="Complement naive Bayes weight normalisation."),
    click.option("--unseen", type=click.Choice(UNSEEN),
                 help="Unseen categories: missing (no evidence, default) or bucket."),
    click.option("--structure", metavar="|".join(STRUCTURES) + "|kdb:K|skdb[:K]|eskdb[:K]|A+B+…",
                 help="naive (default) or tan: tree-augmented naive Bayes (each discrete feature also conditioned "
                      "on one other, a Chow-Liu tree; one more scan); kdb:K (K = 1 to 5): each discrete feature "
                      "conditioned on up to K features of higher mutual information with the class (Sahami's "
                      "k-dependence classifier; K >= 2 one more scan; K >= 3 backs off to fewer parents, "
                      "--backoff); skdb or skdb:K: kdb with k <= K (default 5) and the number of features chosen "
                      "by leave-one-out from the counts (one more scan); eskdb or eskdb:K: the mean posterior of "
                      f"{eskdb.MEMBERS} skdb:K over randomly perturbed rankings and parents, each choosing its own k "
                      "and features (the same scans); aode: averaged one-dependence estimators (every discrete "
                      "feature in turn the parent of all others; the same counts); A+B+… (e.g. tan+kdb:2+aode): "
                      "the average of those structures' joint probabilities."),
    click.option("--aode-min-count", type=float, metavar="M",
                 help="AODE: a value is a super-parent only if seen in at least M training rows (default 1)."),
    click.option("--backoff", metavar="M|loo",
                 help="kdb:3 to kdb:5, skdb and eskdb: pseudo-count M of the back-off of a table conditioned on j "
                      "parents towards the one on j - 1 (kdb:K's default 1); loo (skdb and eskdb, their default): M "
                      "per feature and depth chosen by leave-one-out (in eskdb per member), e.g. --backoff 1."),
    click.option("--tied-variance", is_flag=True, default=None,
                 help="Gaussian features share one variance per feature across classes (the pooled within-class "
                      "variance): log-odds linear in x, e.g. --tied-variance."),
    keep_columns_option,
    bins_option,
    kind_options,
    text_options,
)


def fit_options(command: Callable) -> Callable:
    """Every option of ``sqlnb fit`` that says which model to fit (--kind, the feature
    options, the priors and hyperparameters, the LDA/QDA/logistic and text options,
    --keep-columns), given to the command as one ``fitting`` argument, a
    :class:`FitOptions`. ``sqlnb cv`` and ``sqlnb select`` take the same decorator, so an
    option added here reaches all three commands, with one name, help text and check."""
    @functools.wraps(command)
    def with_fit(*args, kind, feature_kind, features, exclude, weight, binarize, keep_columns, bins, alpha,
                 feature_alpha, beta, estimator, var_smoothing, class_prior, prior_alpha, norm, unseen, structure,
                 aode_min_count, backoff, tied_variance, shrinkage, reg_param, C, standardize, l2, token_pattern, no_lowercase, stop_words, min_df, max_df,
                 max_features, select_k, **kwargs):
        # --select-k ranks every discrete feature and bag term together (sqlnb.fit(select_k=))
        text = text_args(token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, None)
        nb_only = {"--bins": parse_bins(bins), "--select-k": select_k, "--alpha": alpha,
                   "--feature-alpha": feature_alpha or None, "--beta": beta, "--estimator": estimator,
                   "--var-smoothing": var_smoothing, "--class-prior": class_prior, "--prior-alpha": prior_alpha,
                   "--norm": norm, "--unseen": unseen, "--structure": structure, "--tied-variance": tied_variance,
                   "--aode-min-count": aode_min_count, "--backoff": backoff, "--feature-kind": feature_kind or None, "--weight": weight, "--binarize": binarize or None,
                   "text options": text}
        model_kind, params = model_kind_args(kind, {**nb_only, "--shrinkage": shrinkage, "--reg-param": reg_param,
                                                   "--C": C, "--standardize": standardize, "--l2": l2})
        if prior_alpha is not None and class_prior is None:
            class_prior = "dirichlet"  # the concentration of the dirichlet prior: asking for it asks for that prior
        elif prior_alpha is not None and class_prior != "dirichlet":
            raise click.UsageError(f"--prior-alpha is the concentration of the dirichlet class prior; with "
                                   f"--class-prior {class_prior} it would be ignored: drop one of the two")
        if model_kind in ("naive_bayes", WEIGHTED):
            params = {**params, **{k: v for k, v in {
                "alpha": alpha, "beta": parse_beta(beta), "estimator": estimator, "var_smoothing": var_smoothing,
                "class_prior": parse_class_prior(class_prior), "prior_alpha": parse_prior_alpha(prior_alpha),
                "norm": norm, "unseen": unseen, "structure": structure, "tied_variance": tied_variance,
                "aode_min_count": aode_min_count, "backoff": parse_backoff(backoff), "feature_alpha": assignments(feature_alpha, "--feature-alpha", float) or None,
            }.items() if v is not None}}
            family = "auto" if kind == WEIGHTED else kind
            params |= feature_plan_args(family, feature_kind, features, exclude, weight, binarize) | {"text": text}
            params |= {k: v for k, v in {"bins": parse_bins(bins), "select_k": select_k}.items() if v is not None}
        else:
            params |= {"features": split_list(features), "exclude": split_list(exclude)}
        params["keep_columns"] = split_list(keep_columns)
        return command(*args, fitting=FitOptions(model_kind, params), **kwargs)
    return _fit_flags(with_fit)
