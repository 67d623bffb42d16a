"""What is built on fitted models: evaluation, model selection and the generative extras.

* :mod:`~sqlnb.workflows.evaluate` — metrics computed in SQL over the scoring SELECT;
* :mod:`~sqlnb.workflows.ranking` — one-vs-rest ROC AUC, average precision and ECE in SQL;
* :mod:`~sqlnb.workflows.curves` — ROC, precision–recall and reliability points for plots;
* :mod:`~sqlnb.workflows.cv` — cross-validation and grid search from per-fold statistics;
* :mod:`~sqlnb.workflows.compare` — learning curves, generative against discriminative;
* :mod:`~sqlnb.workflows.generative` — update, novelty, sampling and semi-supervised EM;
* :mod:`~sqlnb.workflows.report` — what ``show`` and ``models`` print;
* :mod:`~sqlnb.workflows.export` — training SQL per dialect and DuckDB scoring macros;
* :mod:`~sqlnb.workflows.demo` — the end-to-end job on generated data.
"""
