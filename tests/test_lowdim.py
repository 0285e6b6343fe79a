"""lowdim_pmm: ledger, the exact sensitivity of the moment release, and the subspace's accuracy inequalities.

The registry suites (tests/test_api.py, test_audit.py, test_release_surface.py, test_float_safety.py) cover it as a
registered mechanism.  The accuracy tests here check *pathwise* inequalities of docs/lowdim.md on the noisy moments
a run released (read from its diagnostics), so they hold for every noise draw: a failure is a bug, never bad luck.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.engine.pipeline import collapse_warnings
from privsyn_core.mechanisms.wide_tables import lowdim
from privsyn_core.privacy.accounting import ledger_total

M = lowdim.QUANTISATION


def _run(unit: np.ndarray, epsilon: float = 1.0, relation: str = "replace", **params):
    spec = ps.get_mechanism("lowdim_pmm")
    return spec.run(unit, epsilon, neighbouring=relation, n_synthetic=None, rng=np.random.default_rng(3),
                    **spec.resolve_params(params))


def _near_line(n: int, d: int, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Points ``0.5 + s v`` (``v`` a unit direction, ``s`` uniform) plus small isotropic noise, inside the cube."""
    rng = np.random.default_rng(seed)
    v = np.linspace(1.0, 2.0, d)
    v /= np.linalg.norm(v)
    x = 0.5 + rng.uniform(-0.45, 0.45, (n, 1)) * v * math.sqrt(d) / np.abs(v).sum() * 2
    return np.clip(x + noise * rng.standard_normal((n, d)), 0.0, 1.0), v


@pytest.mark.parametrize("epsilon", [1.0, 0.1, 1 / 3, 7.77])
@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_ledger_sums_exactly_and_names_the_moment_stage(epsilon, relation):
    out = _run(np.random.default_rng(0).random((300, 4)), epsilon, relation, moment_share=0.37)
    assert ledger_total(out.ledger) == epsilon
    assert out.ledger[0][0].startswith(lowdim.MOMENT_STAGE) and len(out.ledger) == 2
    assert math.fsum(e for _, e in out.diagnostics["pmm"]["ledger"]) == out.ledger[1][1]


@pytest.mark.parametrize("d", [1, 2, 3, 5, 9])
def test_add_remove_sensitivity_is_attained_at_a_corner(d):
    """One record at a corner of ``[0,1]^d`` moves every entry by ``m^2`` in absolute value: ``m^2 d(d+3)/2``."""
    for corner in itertools.islice(itertools.product((0.0, 1.0), repeat=d), 8):
        change = lowdim.moment_sums(lowdim.quantise(np.array([corner])))
        assert np.abs(change).sum() == M * M * lowdim.moment_sensitivity(d, "add_remove") == M * M * d * (d + 3) / 2


@pytest.mark.parametrize("d", [1, 2, 3, 6])
def test_replace_sensitivity_is_the_supremum(d):
    """The witness ``y = 1, z = -y/(d+1)`` (quantised) comes within rounding of ``m^2 Delta``, and no pair of a grid
    on the cube (9 levels per coordinate for d <= 2, 5 for d = 3, 3 for d = 6) exceeds it."""
    delta = M * M * lowdim.moment_sensitivity(d, "replace")
    y = np.ones((1, d))
    z = np.full((1, d), (1 - 1 / (d + 1)) / 2)  # x = (y + 1)/2 for y = -1/(d+1)
    witness = np.abs(lowdim.moment_sums(lowdim.quantise(y)) - lowdim.moment_sums(lowdim.quantise(z))).sum()
    assert delta * (1 - 4 / M) <= witness <= delta
    levels = np.linspace(0, 1, 9 if d <= 2 else 5 if d == 3 else 3)
    grid = np.array(list(itertools.product(levels, repeat=d)))
    t = lowdim.quantise(grid)
    per_record = np.stack([lowdim.moment_sums(row[None, :]) for row in t])
    worst = max(np.abs(per_record - per_record[i]).sum(axis=1).max() for i in range(len(per_record)))
    assert worst <= delta
    assert lowdim.moment_sensitivity(d, "replace") == d * (d + 1) / 2 + d * (2 * d + 3) / (2 * (d + 1))


def test_noise_scale_spends_the_moment_share():
    out = _run(np.random.default_rng(0).random((500, 3)), 2.0, "add_remove")
    moments = out.diagnostics["moments"]
    assert moments["sensitivity"] / moments["sigma"] == pytest.approx(out.ledger[0][1], rel=1e-12)


def _true_covariance(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return unit.mean(axis=0), np.cov(unit.T, bias=True).reshape(unit.shape[1], unit.shape[1])


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
@pytest.mark.parametrize("k", [1, 2])
def test_projection_error_obeys_the_ky_fan_inequality(relation, k):
    """Pathwise (docs/lowdim.md, term 1): ``mean_i ||x_i - P x_i|| <= sqrt(sum_{i>k} lambda_i(C) + 2k||E||_op +
    ||mu^ - mu||^2)`` with ``P x = mu^ + V V^T (x - mu^)`` and ``E = C^ - C`` from the run's released moments."""
    unit, _ = _near_line(4000, 5, 0.05)
    out = _run(unit, 1.0, relation, k=k)
    mean, cov = _true_covariance(unit)
    sub = out.diagnostics["subspace"]
    V, mu_hat = sub["basis"], sub["mean"]
    _, cov_hat = lowdim.unpack_moments(out.diagnostics["moments"]["noisy"], 5, len(unit))
    projected = mu_hat + (unit - mu_hat) @ V @ V.T
    lhs = np.linalg.norm(unit - projected, axis=1).mean()
    tail = np.sort(np.linalg.eigvalsh(cov))[::-1][k:].sum()
    rhs = math.sqrt(tail + 2 * k * np.linalg.norm(cov_hat - cov, 2) + np.sum((mu_hat - mean) ** 2))
    assert lhs <= rhs


def test_subspace_recovers_the_line_within_davis_kahan():
    """Pathwise: ``sin angle(v^, v_1) <= 2 ||E||_op / (lambda_1 - lambda_2)`` (Davis-Kahan, Yu-Wang-Samworth form),
    and on this line the bound is informative (below 0.5), so a wrong eigenvector or ordering fails."""
    unit, _ = _near_line(20_000, 6, 0.01)
    out = _run(unit, 2.0, "replace", k=1)
    _, cov = _true_covariance(unit)
    values, vectors = np.linalg.eigh(cov)
    _, cov_hat = lowdim.unpack_moments(out.diagnostics["moments"]["noisy"], 6, len(unit))
    v_hat = out.diagnostics["subspace"]["basis"][:, 0]
    sin = math.sqrt(max(0.0, 1 - float(v_hat @ vectors[:, -1]) ** 2))
    bound = 2 * np.linalg.norm(cov_hat - cov, 2) / (values[-1] - values[-2])
    assert sin <= bound < 0.5


def test_box_holds_the_whole_cube_and_lift_inverts_it():
    """Every corner of the cube projects into ``[0,1]^k`` (the box is public and data-independent given the released
    subspace), and lifting a projected point that lies in the subspace gives it back."""
    out = _run(np.random.default_rng(1).random((400, 4)), 1.0, "replace", k=2)
    sub = out.diagnostics["subspace"]
    space = lowdim.Subspace(sub["mean"], sub["basis"], sub["lo"], sub["width"])
    corners = np.array(list(itertools.product((0.0, 1.0), repeat=4)))
    raw = ((corners - space.mean) @ space.basis - space.lo) / space.width
    assert raw.min() >= -1e-12 and raw.max() <= 1 + 1e-12
    assert np.isclose(raw.min(axis=0), 0).all() and np.isclose(raw.max(axis=0), 1).all()  # tight on each axis
    inside = np.clip(space.mean + (np.array([[0.3, 0.6]]) * space.width + space.lo) @ space.basis.T, 0, 1)
    if np.all((inside > 0) & (inside < 1)):
        assert np.allclose(space.lift(space.to_box(inside)), inside)


def test_output_is_in_the_cube_with_n_rows_and_the_asked_k():
    unit, _ = _near_line(1000, 7, 0.05)
    out = _run(unit, 1.0, "replace", k=3)
    assert out.unit.shape == (1000, 7) and out.unit.min() >= 0 and out.unit.max() <= 1
    assert out.params["k"] == 3 and out.params["k_rule"] == "explicit"
    assert _run(unit, 1.0, "replace", k=20).params["k"] == 7  # capped at d


def test_automatic_k_is_a_function_of_the_noisy_spectrum_only():
    """choose_k reads the noisy eigenvalues, the public widths, n and epsilon: same inputs, same k."""
    eig = np.array([0.2, 0.08, 0.001, 0.0005])
    widths = np.array([1.9, 1.8, 1.7, 1.6])
    k, estimates = lowdim.choose_k(eig, widths, 1e-4, 20_000, 0.7)
    assert k == 2 and len(estimates) == 4 and estimates[1] == min(estimates)
    assert lowdim.choose_k(eig[:1], widths[:1], 1e-4, 20_000, 0.7)[0] == 1


def test_empty_or_nan_data_is_a_data_error():
    with pytest.raises(ps.DataError):
        _run(np.empty((0, 3)))
    with pytest.raises(ps.DataError):
        _run(np.array([[0.1, np.nan]]))


def test_a_constant_categorical_column_is_warned_about_from_the_released_rows():
    """``cars`` (vega_datasets' local copy; domain read off the data): at eps = 1 the noisy mean of ``Origin``'s
    coordinate is clipped to the cube's edge and the 2-dimensional subspace carries little of it, so on seed 1
    every lifted record lands in the cell of 'USA'. The decoding is the schema's (each coordinate to the category
    whose cell holds it); the release warns exactly on the seeds whose ``Origin`` is constant."""
    vega = pytest.importorskip("vega_datasets")
    cars = vega.data.cars().dropna().drop(columns=["Name", "Year"])
    schema = ps.Schema.infer(cars)
    constant = []
    for seed in range(5):
        result = ps.synthesize(cars, "lowdim_pmm", 1.0, schema=schema, rng=seed)
        pd.testing.assert_frame_equal(result.data, schema.decode(result.unit))
        single = result.data["Origin"].nunique() == 1
        warned = any("'Origin' (3 categories) take a single category" in w for w in result.release().warnings)
        assert warned == single, seed
        constant.append(single)
    assert any(constant) and not all(constant)


def test_collapse_warnings_name_constant_categorical_columns_of_two_or_more_categories():
    schema = ps.Schema((ps.Column("two", "categorical", categories=("a", "b")),
                        ps.Column("one", "categorical", categories=("a",)),
                        ps.Column("mixed", "categorical", categories=("a", "b"))))
    rows = 3 * 2**16 + 5  # several chunks of the scan, the different value in the last one
    table = pd.DataFrame({"two": ["b"] * rows, "one": ["a"] * rows, "mixed": ["a"] * (rows - 1) + ["b"]})
    assert collapse_warnings(table, schema) == [
        "synthetic categorical column(s) 'two' (2 categories) take a single category in every row: the output "
        "shows nothing of their distribution"]
