"""Downstream utility: train on synthetic, test on real (TSTR), beside train on real (TRTR).

A model is trained on the synthetic table and scored on real rows it has never seen; the same model trained on
real rows gives the reference score. Evaluation only: it reads the real data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import t as student_t
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.metrics import accuracy_score, mean_absolute_error, r2_score, roc_auc_score
from threadpoolctl import threadpool_limits

from privsyn_core.data.domain import Column, Schema
from privsyn_core.errors import ParameterError

TEST_FRACTION = 0.3
TSTR_ITERATIONS = 25  # boosting iterations (one tree each, or one per class for more than two classes)
TSTR_LEARNING_RATE = 0.2  # shrinkage of each tree (twice scikit-learn's default, for half its iterations)
TSTR_LEAVES = 15  # leaves per tree at most (half scikit-learn's default: the fit's cost is in its nodes)
TSTR_BOOTSTRAP = 200  # bootstrap replicates of the held-out rows for the interval of a headline score
TSTR_CONFIDENCE = 0.95


def tstr(real_df: pd.DataFrame, synth_df: pd.DataFrame, target: str, *, real_test: pd.DataFrame | None = None,
         task: str = "auto", schema: Schema | None = None, seed: int = 0) -> dict:
    r"""Train-on-synthetic/test-on-real score beside the train-on-real score for one target column.

    Features are the other schema columns: numeric ones in unit coordinates, categorical ones one-hot on the
    public category list, so both training sets share one feature space. The model is scikit-learn's
    ``HistGradientBoostingClassifier`` / ``Regressor`` (gradient boosting on 255-bin feature histograms, Ke et al.
    2017, "LightGBM"): :data:`TSTR_ITERATIONS` iterations at learning rate :data:`TSTR_LEARNING_RATE`, trees of at
    most :data:`TSTR_LEAVES` leaves of at least 20 rows, no early stopping, one thread, ``random_state=seed``, so the
    score is deterministic. It is fitted once on each training set; its cost grows with the trees' nodes
    (iterations x leaves, times the classes for a target of more than two classes) and the training rows.

    **Interval.** The headline score of each side (accuracy or :math:`R^2`) comes with a
    :data:`TSTR_CONFIDENCE` interval over the held-out rows: value :math:`\pm t_{0.975, B-1}` bootstrap standard
    errors, ``B =`` :data:`TSTR_BOOTSTRAP` resamples of the test rows with replacement, the same resamples for
    both sides. It covers the sampling of the test rows only: each model is trained once, on fixed rows.

    Parameters
    ----------
    real_df, synth_df : DataFrame
        Real rows (the training rows of train-on-real) and synthetic rows.
    target : str
        Column to predict.
    real_test : DataFrame, optional
        Real hold-out rows. Give it when the synthetic data was made from ``real_df``: test rows must not have
        been seen by the synthesiser. Otherwise a random 30% of ``real_df`` (``seed``) is held out and the rest
        is the train-on-real set.
    task : {"auto", "classification", "regression"}
        "auto": classification for a categorical target, regression for a numeric one.
    schema : Schema, optional
        Inferred from the real data when not given.
    seed : int
        Seeds the split, the models and the bootstrap.

    Returns
    -------
    dict
        ``task``, ``target``, ``model``, ``train_on_synthetic`` and ``train_on_real`` (accuracy and, for two
        classes, ROC AUC; or R^2 and MAE; each with ``low`` and ``high`` of its headline score), ``guess`` (the
        headline score of always predicting the real training rows' most common class, or their mean: what a
        model must beat to be worth anything), the row counts, ``value`` = the TSTR headline score with its
        interval ``low``, ``high`` and ``interval`` (how it was made), and ``floor`` (the train-on-real headline
        score: the level a synthetic table as good as the real one reaches) with ``floor_low``, ``floor_high``.
    """
    schema = Schema.infer(real_df) if schema is None else schema
    if target not in schema.names:
        raise ParameterError(f"target {target!r} is not a column; choose one of {schema.names}")
    if len(schema.names) < 2:
        raise ParameterError("TSTR needs at least one feature column besides the target")
    task = _resolve_task(task, schema[target])
    train_real, test_real = (real_df, real_test) if real_test is not None else _split(real_df, seed)
    features = schema.select([n for n in schema.names if n != target])
    X_test, y_test = _features(test_real, features), _labels(test_real, schema[target], task)
    headline = "accuracy" if task == "classification" else "r2"
    resamples = np.random.default_rng(seed).integers(0, len(y_test), (TSTR_BOOTSTRAP, len(y_test)))
    scores = {}
    with threadpool_limits(limits=1):
        for name, frame in (("train_on_synthetic", synth_df), ("train_on_real", train_real)):
            model = _fit(_features(frame, features), _labels(frame, schema[target], task), task, seed)
            scores[name] = _score(model, X_test, y_test, task, resamples)
    scores["guess"] = _guess(_labels(train_real, schema[target], task), y_test, task)
    synthetic, real = scores["train_on_synthetic"], scores["train_on_real"]
    return {"value": synthetic[headline], "low": synthetic["low"], "high": synthetic["high"],
            "interval": f"{TSTR_CONFIDENCE:.0%}: value +- Student-t quantile x bootstrap standard error over "
                        f"{TSTR_BOOTSTRAP} resamples of the {len(y_test)} test rows (each model trained once)",
            "floor": real[headline], "floor_low": real["low"], "floor_high": real["high"],
            "score": headline, "task": task, "target": target,
            "model": f"HistGradientBoosting{'Classifier' if task == 'classification' else 'Regressor'}",
            "iterations": TSTR_ITERATIONS, "learning_rate": TSTR_LEARNING_RATE,
            "max_leaves": TSTR_LEAVES, **scores,
            "n_train_real": len(train_real), "n_train_synthetic": len(synth_df), "n_test": len(test_real),
            "test_rows": "given hold-out" if real_test is not None else f"random {TEST_FRACTION:.0%} of the real data"}


def _resolve_task(task: str, column) -> str:
    if task == "auto":
        return "classification" if column.kind == "categorical" else "regression"
    if task not in ("classification", "regression"):
        raise ParameterError(f"task must be 'auto', 'classification' or 'regression', got {task!r}")
    return task


def _split(df: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    if len(df) < 4:
        raise ParameterError("TSTR needs at least 4 real rows to hold some out; give real_test")
    order = np.random.default_rng(seed).permutation(len(df))
    n_test = max(1, round(TEST_FRACTION * len(df)))
    return df.iloc[order[n_test:]], df.iloc[order[:n_test]]


def _features(df: pd.DataFrame, schema: Schema) -> np.ndarray:
    unit = schema.encode(df)[0]
    blocks = []
    for j, col in enumerate(schema.columns):
        if col.kind == "numeric":
            blocks.append(unit[:, [j]])
        else:
            k = len(col.category_list)
            codes = np.minimum((unit[:, j] * k).astype(np.int64), k - 1)
            blocks.append(np.eye(k)[codes])
    return np.hstack(blocks)


def _labels(df: pd.DataFrame, column: Column, task: str) -> np.ndarray:
    unit = Schema((column,)).encode(df)[0][:, 0]
    if task == "regression":
        return unit
    k = len(column.category_list) if column.kind == "categorical" else 2
    return np.minimum((unit * k).astype(np.int64), k - 1)


def _fit(X: np.ndarray, y: np.ndarray, task: str, seed: int):
    """Histogram gradient boosting; a constant predictor when the training labels have a single value."""
    if np.unique(y).size < 2:
        dummy = DummyClassifier(strategy="most_frequent") if task == "classification" else DummyRegressor()
        return dummy.fit(X, y)
    booster = HistGradientBoostingClassifier if task == "classification" else HistGradientBoostingRegressor
    return booster(max_iter=TSTR_ITERATIONS, learning_rate=TSTR_LEARNING_RATE, max_leaf_nodes=TSTR_LEAVES,
                   early_stopping=False, random_state=seed).fit(X, y)


def _guess(y_train: np.ndarray, y_test: np.ndarray, task: str) -> dict:
    """The score of a constant prediction learnt from the training labels (most common class, or the mean)."""
    if task == "regression":
        return {"r2": float(r2_score(y_test, np.full(len(y_test), float(np.mean(y_train)))))}
    values, counts = np.unique(y_train, return_counts=True)
    return {"accuracy": float(np.mean(y_test == values[np.argmax(counts)]))}


def _score(model, X: np.ndarray, y: np.ndarray, task: str, resamples: np.ndarray | None = None) -> dict:
    """The scores of ``model`` on the test rows and, given ``resamples`` (replicates x test rows: indices of the
    rows drawn with replacement), the bootstrap interval ``low``, ``high`` of the headline one."""
    predicted = model.predict(X)
    if task == "regression":
        out = {"r2": float(r2_score(y, predicted)), "mae": float(mean_absolute_error(y, predicted))}
    else:
        out = {"accuracy": float(accuracy_score(y, predicted))}
        if np.unique(y).size == 2 and hasattr(model, "predict_proba") and len(model.classes_) == 2:
            out["roc_auc"] = float(roc_auc_score(y, model.predict_proba(X)[:, 1]))
    if resamples is None:
        return out
    if task == "regression":
        value, replicates = out["r2"], _r2_rows(y[resamples], predicted[resamples])
    else:
        value, replicates = out["accuracy"], (predicted == y)[resamples].mean(axis=1)
    half = float(student_t.ppf(0.5 + TSTR_CONFIDENCE / 2, len(replicates) - 1) * np.std(replicates, ddof=1))
    return {**out, "low": value - half, "high": value + half}


def _r2_rows(y: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """R^2 of each row of ``predicted`` against the same row of ``y``; where a row of ``y`` is constant, 1 if it
    is predicted exactly and 0 otherwise (``r2_score``'s ``force_finite`` convention)."""
    residual = np.sum((y - predicted) ** 2, axis=1)
    total = np.sum((y - y.mean(axis=1, keepdims=True)) ** 2, axis=1)
    constant = np.where(residual == 0, 1.0, 0.0)
    return np.where(total > 0, 1.0 - residual / np.where(total > 0, total, 1.0), constant)
