"""Downstream utility: train on synthetic, test on real (TSTR), beside train on real (TRTR).

A model is trained on the synthetic table and scored on real rows it has never seen; the same model trained on
real rows gives the reference score. Evaluation only: it reads the real data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import accuracy_score, mean_absolute_error, r2_score, roc_auc_score

from privsyn_core.data.domain import Column, Schema
from privsyn_core.errors import ParameterError

TEST_FRACTION = 0.3


def tstr(real_df: pd.DataFrame, synth_df: pd.DataFrame, target: str, *, real_test: pd.DataFrame | None = None,
         task: str = "auto", schema: Schema | None = None, seed: int = 0) -> dict:
    """Train-on-synthetic/test-on-real score beside the train-on-real score for one target column.

    Features are the other schema columns: numeric ones in unit coordinates, categorical ones one-hot on the
    public category list, so both training sets share one feature space. The model is scikit-learn's
    ``RandomForestClassifier`` / ``Regressor`` (100 trees, leaves of at least 5 rows, one thread,
    ``random_state=seed``): no scaling needed and deterministic.

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

    Returns
    -------
    dict
        ``task``, ``target``, ``model``, ``train_on_synthetic`` and ``train_on_real`` (accuracy and, for two
        classes, ROC AUC; or R^2 and MAE), ``guess`` (the headline score of always predicting the real training
        rows' most common class, or their mean: what a model must beat to be worth anything), the row counts and
        ``value`` = the TSTR headline score (accuracy or R^2).
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
    scores = {}
    for name, frame in (("train_on_synthetic", synth_df), ("train_on_real", train_real)):
        model = _fit(_features(frame, features), _labels(frame, schema[target], task), task, seed)
        scores[name] = _score(model, X_test, y_test, task)
    headline = "accuracy" if task == "classification" else "r2"
    scores["guess"] = _guess(_labels(train_real, schema[target], task), y_test, task)
    return {"value": scores["train_on_synthetic"][headline], "score": headline, "task": task, "target": target,
            "model": f"RandomForest{'Classifier' if task == 'classification' else 'Regressor'}",
            **scores, "n_train_real": len(train_real), "n_train_synthetic": len(synth_df), "n_test": len(test_real),
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
    """A random forest; a constant predictor when the training labels have a single value."""
    if np.unique(y).size < 2:
        dummy = DummyClassifier(strategy="most_frequent") if task == "classification" else DummyRegressor()
        return dummy.fit(X, y)
    forest = RandomForestClassifier if task == "classification" else RandomForestRegressor
    model = forest(n_estimators=100, min_samples_leaf=5, n_jobs=1, random_state=seed)
    return model.fit(X, y)


def _guess(y_train: np.ndarray, y_test: np.ndarray, task: str) -> dict:
    """The score of a constant prediction learnt from the training labels (most common class, or the mean)."""
    if task == "regression":
        return {"r2": float(r2_score(y_test, np.full(len(y_test), float(np.mean(y_train)))))}
    values, counts = np.unique(y_train, return_counts=True)
    return {"accuracy": float(np.mean(y_test == values[np.argmax(counts)]))}


def _score(model, X: np.ndarray, y: np.ndarray, task: str) -> dict:
    predicted = model.predict(X)
    if task == "regression":
        return {"r2": float(r2_score(y, predicted)), "mae": float(mean_absolute_error(y, predicted))}
    out = {"accuracy": float(accuracy_score(y, predicted))}
    if np.unique(y).size == 2 and hasattr(model, "predict_proba") and len(model.classes_) == 2:
        out["roc_auc"] = float(roc_auc_score(y, model.predict_proba(X)[:, 1]))
    return out
