"""Text given as a long token table, one (document, token[, count]) row each:
``sqlnb fit-long`` fits naive Bayes on it and ``sqlnb score-long`` scores documents with
such a model.
"""

from __future__ import annotations

import click

from sqlnb.api import fit_long
from sqlnb.cli.app import Settings
from sqlnb.cli.io import check_new_model, load, model_str, save, write_out
from sqlnb.cli.options import (alpha_option, keep_columns, keep_option, kind_option, label_option, model_option,
                               no_proba_option, out_option, replace_option, score_outputs, text_args, text_options)
from sqlnb.errors import SqlnbError
from sqlnb.io.locations import data_source, parse_data, parse_model, parse_out
from sqlnb.models.naive_bayes import text as text_module


@click.command("fit-long")
@click.argument("tokens")
@click.argument("labels")
@click.option("--id", "id_col", required=True, metavar="COL", help="Document id column (both tables).")
@click.option("--token", required=True, metavar="COL", help="Token column of TOKENS.")
@click.option("--count", metavar="COL", help="Count column of TOKENS (default: one row per occurrence).")
@label_option("Label column of LABELS.")
@model_option()
@kind_option("Naive Bayes family of the token bag.", choices=("multinomial", "bernoulli", "complement"),
             default="multinomial")
@alpha_option("Pseudo-count (default 1).")
@text_options
@replace_option
@click.pass_obj
def fit_long_command(settings: Settings, tokens, labels, id_col, token, count, label, model, kind, alpha,
                     token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, select_k, replace):
    """Fit naive Bayes on a long token table: TOKENS holds (id, token[, count]) rows,
    LABELS one (id, label) row per document.

    \b
    Example:
      sqlnb fit-long db.duckdb:tokens db.duckdb:docs --id doc --token term --count n --label topic \\
          --model models.duckdb:topics --min-df 2
    """
    settings.require_duckdb("fit-long")
    if token_pattern or no_lowercase:
        raise SqlnbError("--token-pattern and --no-lowercase apply to text columns, not to a token table")
    loc = parse_model(model)
    tok_spec, lab_spec = parse_data(tokens), parse_data(labels)
    text = text_args(None, None, stop_words, min_df, max_df, max_features, select_k)
    check_new_model(settings, loc, replace)
    hyper = {"alpha": alpha} if alpha is not None else {}
    with settings.working(), settings.connect() as con:
        m = fit_long(data_source(con, tok_spec), data_source(con, lab_spec), id=id_col, token=token, label=label,
                     count=count, kind=kind, con=con, text=text, **hyper)
        m.log_parameters()
    save(settings, m, loc, replace)
    settings.summary(f"fitted {model_str(loc)}: {len(m.classes)} classes")


@click.command("score-long")
@click.argument("tokens")
@click.option("--docs", metavar="DATA", help="One row per document to score (default: TOKENS' distinct ids).")
@model_option()
@out_option()
@keep_option("Columns of --docs to keep (default: all).")
@no_proba_option
@replace_option
@click.pass_obj
def score_long(settings: Settings, tokens, docs, model, out, keep, no_proba, replace):
    """Score documents given as a long token table with a MODEL from 'sqlnb fit-long'.

    \b
    Example:
      sqlnb score-long db.duckdb:new_tokens --model models.duckdb:topics --out scored.parquet
    """
    settings.require_duckdb("score-long")
    parse_out(out)
    tok_spec, doc_spec = parse_data(tokens), parse_data(docs) if docs else None
    keep_cols = keep_columns(keep)
    m = load(settings, model)
    bags = [f for f in getattr(m, "features", []) if f.bag is not None and f.bag.get("layout") == "long"]
    if not bags:
        raise SqlnbError("score-long scores models from 'sqlnb fit-long'; use 'sqlnb score'")
    outputs = score_outputs(no_proba)

    def query(con, own_db):
        tok = text_module.resolve_long(con, data_source(con, tok_spec, own_db), bags[0])
        # default: the documents in the order of their first token row, as in Python
        doc = text_module.first_token_docs(tok, bags[0]) if doc_spec is None else data_source(con, doc_spec, own_db)
        doc_src = text_module.resolve_long(con, doc, bags[0], docs=True)
        return text_module.long_scoring_query(m, tok, doc_src, outputs, keep_cols, con)
    settings.summary(f"scored {write_out(settings, out, replace, query)}")
