"""microagg_anon (Alg 1) and microagg_dp (Alg 4) of [BSV23]: registry, budget, noise, and the
paper's identities and constant-free inequalities (spec 7.2), checked on every run.

Statistical checks use Hoeffding radii or KS tests with false-failure rate ``ALPHA_TEST``.
"""

import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_core as ps
from privsyn_core.data.unit_codec import UnitCodec
from privsyn_core.errors import ParameterError, SchemaError
from privsyn_core.evaluation.marginals import marginal_table
from privsyn_core.mechanisms.microagg.aggregation import (
    alg4_params,
    damped_microaggregate,
    lattice_covering,
    microaggregate,
    moment_distance,
    nearest_point_labels,
    noisy_centres,
    noisy_weights,
    project_simplex_l1,
    second_moment,
    tensorization_constant,
)

ALPHA_TEST = 1e-6
EPSILONS = [1e-3, 0.1, 1 / 3, 0.7, 1.0, 2.5, 7.3, 10.0]


def factor_data(n, p, seed=0):
    """Correlated Boolean data, spec 8.2 R2: X = 1[Z W^T + 0.7 N > 0.2]."""
    rng = np.random.default_rng(seed)
    Z, W = rng.standard_normal((n, 2)), rng.standard_normal((p, 2))
    return (Z @ W.T + 0.7 * rng.standard_normal((n, p)) > 0.2).astype(np.uint8)


def run(name, X, epsilon=1.0, seed=0, n_synthetic=None, **params):
    spec = ps.get_mechanism(name)
    return spec.run(X, epsilon, neighbouring="replace", n_synthetic=n_synthetic, rng=np.random.default_rng(seed),
                    **spec.resolve_params(params))


def mixed_table(n, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    return pd.DataFrame({"age": age, "kids": np.minimum(rng.poisson(1.2, n), 3),
                         "income": np.clip(age * 900 + rng.normal(0, 2e4, n), 0, 1e5),
                         "colour": rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]),
                         "member": age + rng.normal(0, 10, n) > 50})


SCHEMA = ps.Schema((ps.Column("age", "numeric", lo=18, hi=90, integer=True),
                    ps.Column("kids", "numeric", lo=0, hi=3, integer=True),
                    ps.Column("income", "numeric", lo=0.0, hi=1e5),
                    ps.Column("colour", "categorical", categories=("red", "green", "blue")),
                    ps.Column("member", "categorical", categories=(False, True))))


# -- registry and end to end -----------------------------------------------------------------
def test_registry_entries():
    anon, dp = ps.get_mechanism("microagg_anon"), ps.get_mechanism("microagg_dp")
    assert anon.data_kind == dp.data_kind == "boolean" and anon.codec is not UnitCodec and dp.codec is not UnitCodec
    assert anon.is_private is False and "NOT differentially private" in anon.guarantee
    assert dp.is_private is True and dp.neighbouring == ("replace",) and "epsilon-DP" in dp.guarantee
    assert dp.params["kappa"].default == 1 / 3 and dp.params["t"].default == dp.params["b"].default == "paper"


def boolean_table(n, seed=0):
    """Boolean columns as a schema declares them: numeric 0/1 integers and two-category columns."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    return pd.DataFrame({"senior": (age > 60).astype(np.int64), "kids": (rng.poisson(1.2, n) > 0).astype(np.int64),
                         "smoker": rng.choice(["no", "yes"], n, p=[0.7, 0.3]),
                         "member": age + rng.normal(0, 10, n) > 50})


BOOLEAN_SCHEMA = ps.Schema((ps.Column("senior", "numeric", lo=0, hi=1, integer=True),
                            ps.Column("kids", "numeric", lo=0, hi=1, integer=True),
                            ps.Column("smoker", "categorical", categories=("no", "yes")),
                            ps.Column("member", "categorical", categories=(False, True))))


@pytest.mark.parametrize("mechanism", ["microagg_anon", "microagg_dp"])
def test_synthesize_end_to_end_on_a_boolean_table(mechanism):
    df = boolean_table(2000)
    result = ps.synthesize(df, mechanism, 1.0, schema=BOOLEAN_SCHEMA, rng=5, n_synthetic=700)
    out = result.data
    assert list(out.columns) == list(df.columns) and len(out) == 700
    assert out.dtypes.to_dict() == df.dtypes.to_dict()
    assert set(out["senior"]) <= {0, 1} and set(out["kids"]) <= {0, 1} and out["smoker"].isin(["no", "yes"]).all()
    assert result.unit_rows.shape == (700, 4) and set(np.unique(result.unit_rows)) <= {0, 1}
    assert result.dp_valid is (mechanism == "microagg_dp")
    groups = result.diagnostics["groups"]
    assert len(groups["sizes"]) == len(groups["centres"]) == len(groups["noisy_weights"]) == len(result.weights)
    again = ps.synthesize(df, mechanism, 1.0, schema=BOOLEAN_SCHEMA, rng=5, n_synthetic=700)
    pd.testing.assert_frame_equal(out, again.data)


def _replaced(schema, column):
    """``schema`` with ``column`` in place of the column of the same name."""
    return ps.Schema(tuple(column if c.name == column.name else c for c in schema.columns))


@pytest.mark.parametrize("mechanism", ["microagg_anon", "microagg_dp"])
def test_boolean_mechanisms_refuse_non_boolean_columns_from_the_schema_alone(mechanism, monkeypatch):
    """A numeric column other than integer [0, 1], or a categorical one with 3 categories, is refused by
    the public schema before the data is read (the data here are Boolean; the schema decides)."""
    from privsyn_core.data import domain
    monkeypatch.setattr(domain.Schema, "encode", lambda *a, **k: pytest.fail("the data was read"))
    df = boolean_table(200)
    for column in (ps.Column("senior", "numeric", lo=0, hi=1),  # not integer: continuous in [0, 1]
                   ps.Column("senior", "numeric", lo=0, hi=2, integer=True),
                   ps.Column("smoker", "categorical", categories=("no", "yes", "unknown"))):
        refusal = rf"{mechanism} works on Boolean columns only.*; {column.name} is not:.*pmm"
        with pytest.raises(SchemaError, match=refusal):
            ps.synthesize(df, mechanism, 1.0, schema=_replaced(BOOLEAN_SCHEMA, column), rng=0)
    with pytest.raises(SchemaError, match=r"; age, kids, income, colour are not: choose"):
        ps.synthesize(mixed_table(100), mechanism, 1.0, schema=SCHEMA, rng=0)


def test_microagg_dp_rejects_add_remove():
    with pytest.raises(ParameterError, match="replace"):
        ps.synthesize(boolean_table(50), "microagg_dp", 1.0, schema=BOOLEAN_SCHEMA, neighbouring="add_remove", rng=0)


# -- Algorithm 1 ------------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["pc", "index", "random"])
def test_anon_means_anonymity_and_loss_chain(order):
    X = factor_data(4000, 8, seed=1)
    out = run("microagg_anon", X, k=400, within_cell_order=order)
    groups, checks = out.diagnostics["groups"], out.diagnostics["groups"]["checks"]
    np.testing.assert_allclose(out.weights @ out.unit, X.mean(axis=0), rtol=0, atol=1e-13)  # (4.2)
    assert (groups["sizes"] == 10).all() and len(groups["sizes"]) == 400  # (n/k)-anonymity
    assert out.params["t"] == 1 and out.params["s"] == 3 and out.params["anonymity"] == 10
    assert checks["loss_I"] <= checks["loss_F"] + checks["merged_fraction"] + 1e-12  # Lemmas 3.8-3.9
    assert checks["loss_F"] <= checks["mean_projected_sq"] + checks["pca_tail"] + 1e-12  # Lemma 3.2
    assert checks["pca_tail"] <= checks["pca_tail_bound"] and checks["max_projected"] <= checks["two_alpha"]
    assert math.isinf(out.ledger[0][1])


def test_anon_k_not_dividing_n_and_bad_k():
    X = factor_data(1003, 6, seed=2)
    out = run("microagg_anon", X, k=100)
    sizes = out.diagnostics["groups"]["sizes"]
    assert sizes.min() >= 10 and sizes.max() < 20 and sizes.sum() == 1003 and len(sizes) == 100
    np.testing.assert_allclose(out.weights @ out.unit, X.mean(axis=0), atol=1e-13)
    with pytest.raises(ParameterError, match="k <= n"):
        run("microagg_anon", X[:50], k=60)
    with pytest.raises(ParameterError, match="at least 9 records"):
        run("microagg_anon", X[:8])
    clamped = run("microagg_anon", X, k=100, t=9)
    assert clamped.params["t"] == 6 and any("clamped" in w for w in clamped.warnings)


def hoeffding_radius(m, sets, alpha):
    return math.sqrt(math.log(2 * sets / alpha) / (2 * m))


@pytest.mark.parametrize("order", ["pc", "index"])
def test_anon_marginal_error_chain_of_spec_7_2(order):
    """Per run: avg E_micro^2 <= 2^d c_d^2 loss_I^2 (deterministic), and the synthetic rows deviate from the
    released averages by at most the Hoeffding radii of bootstrap and rounding (rate ALPHA_TEST)."""
    X = factor_data(4000, 8, seed=3)
    out = run("microagg_anon", X, k=400, within_cell_order=order)
    loss_i, m = out.diagnostics["groups"]["checks"]["loss_I"], len(out.rows)
    sets = sum(math.comb(8, d) for d in (1, 2, 3))
    slack = hoeffding_radius(m, sets, ALPHA_TEST / 2) + 2 * hoeffding_radius(m, sets, ALPHA_TEST / 2)
    for d in (1, 2, 3):
        truth = marginal_table(X, d)
        released = marginal_table(out.unit, d, out.weights)
        assert np.mean((truth - released) ** 2) <= 2**d * tensorization_constant(d) ** 2 * loss_i**2 + 1e-24
        assert np.max(np.abs(marginal_table(out.rows, d) - released)) <= slack


# -- Algorithm 4: budget and noise -------------------------------------------------------------
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_dp_ledger_sums_exactly_to_epsilon(epsilon):
    result = ps.synthesize(pd.DataFrame(factor_data(300, 5, seed=4).astype(bool), columns=list("abcde")),
                           "microagg_dp", epsilon, schema=_bool_schema(5), rng=1)
    assert math.fsum(e for _, e in result.ledger) == epsilon == result.epsilon
    assert [e for _, e in result.ledger[:2]] == [epsilon / 3, epsilon / 3] and len(result.ledger) == 3


def _bool_schema(p):
    return ps.Schema(tuple(ps.Column(c, "categorical", categories=(False, True)) for c in "abcdefghij"[:p]))


def test_dp_noise_scales_follow_section_5():
    X = factor_data(10_000, 10, seed=5)
    out = run("microagg_dp", X, epsilon=1.0)
    _alpha, t, b = alg4_params(10_000, 10, 1.0, 1 / 3)
    assert (out.params["t"], out.params["s"], out.params["b"]) == (t, 3, b)
    assert (t, b) == (1, math.sqrt(10 * 10_000 ** (1 - 1 / 3)))
    assert out.params["weight_noise_scale"] == 6 / (10_000 * 1.0)
    assert out.params["vector_noise_scale"] == 12 * math.sqrt(10) / (b * 1.0)
    assert round(out.params["vector_noise_scale"] * math.sqrt(10), 1) == 1.8  # 12 p/(b eps), table of spec 5
    for n, scale in [(10**3, 3.8), (10**5, 0.82), (10**6, 0.38), (10**7, 0.18)]:
        assert round(12 * 10 / alg4_params(n, 10, 1.0, 1 / 3)[2], 2 if scale < 1 else 1) == scale
    custom = run("microagg_dp", X, epsilon=2.0, b=40.0, t=2)
    assert custom.params["vector_noise_scale"] == 12 * math.sqrt(10) / (40.0 * 2.0)
    assert custom.params["weight_noise_scale"] == 6 / (10_000 * 2.0)


def test_dp_noise_laws_and_shapes():
    """rho_j ~ Lap(6/(n eps)) on all s cells and r_ji ~ Lap(12 sqrt(p)/(b eps)) (KS, rate ALPHA_TEST each)."""
    X = factor_data(3000, 6, seed=6)
    rho, r = [], []
    for seed in range(8):
        out = run("microagg_dp", X, epsilon=0.5, seed=seed, t=3)
        noise, s = out.diagnostics["noise"], out.params["s"]
        assert noise["rho"].shape == (s,) and noise["r"].shape == (s, 6) and len(out.unit) == s
        assert (out.diagnostics["groups"]["sizes"] == 0).any()  # empty cells are released too
        rho.append(noise["rho"] / out.params["weight_noise_scale"])
        r.append(noise["r"].ravel() / out.params["vector_noise_scale"])
    assert stats.kstest(np.concatenate(rho), "laplace").pvalue > ALPHA_TEST
    assert stats.kstest(np.concatenate(r), "laplace").pvalue > ALPHA_TEST


def test_dp_release_is_the_projected_noisy_damped_average():
    X = factor_data(3000, 6, seed=7)
    out = run("microagg_dp", X, epsilon=2.0, t=2)
    noise, s, b, p = out.diagnostics["noise"], out.params["s"], out.params["b"], 6
    sizes, w, damped = damped_microaggregate(X / math.sqrt(p), noise["labels"], s, b)
    np.testing.assert_array_equal(sizes, out.diagnostics["groups"]["sizes"])
    np.testing.assert_array_equal(w, noise["w"])
    np.testing.assert_array_equal(damped, noise["damped"])
    np.testing.assert_array_equal(out.weights, project_simplex_l1(w + noise["rho"]))
    np.testing.assert_allclose(out.unit, np.clip(damped + noise["r"], 0, 1 / math.sqrt(p)) * math.sqrt(p),
                               rtol=0, atol=1e-15)
    assert out.unit.min() >= 0 and out.unit.max() <= 1


def test_dp_sensitivity_with_a_fixed_projection():
    """Spec 6 items 2-3: with V fixed, ||w - w'||_1 <= 2/n and sum_j ||ytilde_j - ytilde'_j||_1 <= 4 sqrt(p)/b."""
    rng = np.random.default_rng(8)
    n, p = 400, 7
    V, _ = np.linalg.qr(rng.standard_normal((p, 2)))
    G = lattice_covering(2, 0.5)
    X = factor_data(n, p, seed=8)
    for b in (3.0, 10.5, 37.2):
        base = damped_microaggregate(X / math.sqrt(p), nearest_point_labels(X / math.sqrt(p) @ V, G), len(G), b)
        for _ in range(150):
            Y = X.copy()
            Y[rng.integers(n)] = rng.integers(0, 2, p)
            scaled = Y / math.sqrt(p)
            _, w, damped = damped_microaggregate(scaled, nearest_point_labels(scaled @ V, G), len(G), b)
            assert np.abs(w - base[1]).sum() <= 2 / n + 1e-15
            assert np.abs(damped - base[2]).sum() <= 4 * math.sqrt(p) / b + 1e-12


def test_dp_lattice_noise_stays_within_its_budget_exactly():
    """The lattice form of Alg 4 step 6 (noisy_weights, noisy_centres), with V fixed: over random replacements,
    the snapped centres q = rint(2^k fl(C/D)) move by at most Delta_q = 2^k 4p/b + 2p (1 + 2^(k-52)) and the
    sizes' points by 2^(k+1), and each discrete scale spends at most its epsilon on them, in exact rationals.
    Large b (up to 1e9) makes 2^k large, where the float error of C/D counts."""
    rng = np.random.default_rng(18)
    n, p, epsilon = 400, 7, 1 / 3
    V, _ = np.linalg.qr(rng.standard_normal((p, 2)))
    G = lattice_covering(2, 0.5)
    X = factor_data(n, p, seed=18)
    for b in (3.0, 10.5, 37.2, 1e9):
        labels = nearest_point_labels(X / math.sqrt(p) @ V, G)
        sizes = np.bincount(labels, minlength=len(G))
        base = noisy_centres(X, labels, sizes, b, epsilon, np.random.default_rng(0))
        weights = noisy_weights(sizes, epsilon, np.random.default_rng(0))
        k = base.exponent
        bound = Fraction(4 * p) / Fraction(b) * 2 ** k + 2 * p * (1 + Fraction(2) ** (k - 52))
        assert bound / Fraction(base.discrete_scale) <= Fraction(epsilon)
        assert Fraction(2 << weights.exponent) / Fraction(weights.discrete_scale) <= Fraction(epsilon)
        assert snapping_error(X, labels, sizes, b, base) <= Fraction(1, 2) + Fraction(2) ** (k - 53)
        for _ in range(30):
            Y = X.copy()
            Y[rng.integers(n)] = rng.integers(0, 2, p)
            other_labels = nearest_point_labels(Y / math.sqrt(p) @ V, G)
            other_sizes = np.bincount(other_labels, minlength=len(G))
            other = noisy_centres(Y, other_labels, other_sizes, b, epsilon, np.random.default_rng(0))
            assert Fraction(int(np.abs(other.points - base.points).sum())) <= bound
            moved = noisy_weights(other_sizes, epsilon, np.random.default_rng(0)).points - weights.points
            assert int(np.abs(moved).sum()) <= 2 << weights.exponent


def snapping_error(X: np.ndarray, labels: np.ndarray, sizes: np.ndarray, b: float, release) -> Fraction:
    """max |q - 2^k C/D| over the cells and columns, in exact rationals (C the cell sums, D = max(|F_j|, b))."""
    sums = np.zeros((len(sizes), X.shape[1]), dtype=np.int64)
    np.add.at(sums, labels, X.astype(np.int64))
    return max(abs(Fraction(int(q)) - Fraction(int(c)) * 2 ** release.exponent / Fraction(max(int(size), b)))
               for q_row, c_row, size in zip(release.points, sums, sizes, strict=True)
               for q, c in zip(q_row, c_row, strict=True))


def test_dp_t_zero_for_small_n_keeps_the_budget_split():
    X = factor_data(500, 5, seed=9)
    out = run("microagg_dp", X, epsilon=0.9)
    assert out.params["t"] == 0 and out.params["s"] == 1 and out.weights.tolist() == [1.0]
    assert out.diagnostics["groups"]["subspace"].shape == (5, 0)
    assert math.fsum(e for _, e in out.ledger) == 0.9 and any("t = 0" in w for w in out.warnings)


# -- Algorithm 4: the deterministic bound (5.7) and Thm 5.6, every run ------------------------------
@pytest.mark.parametrize("epsilon, params", [(1.0, {}), (0.5, {"t": 2}), (10.0, {"t": 2, "b": 5.0}),
                                             (3.0, {"kappa": 0.6})])
def test_dp_bound_5_7_and_theorem_5_6_hold_pathwise(epsilon, params):
    n, p = 3000, 6
    X = factor_data(n, p, seed=10)
    out = run("microagg_dp", X, epsilon=epsilon, **params)
    noise, V = out.diagnostics["noise"], out.diagnostics["groups"]["subspace"]
    alpha, s, b = out.params["alpha"], out.params["s"], out.params["b"]
    scaled, S = X / math.sqrt(p), second_moment(X)
    P = V @ V.T
    tail = np.linalg.norm((np.eye(p) - P) @ S @ (np.eye(p) - P))
    a = np.full(n, 1 / n)
    y_bar = out.unit / math.sqrt(p)
    _, w_true, y_true = microaggregate(scaled, noise["labels"], s)
    for d in (1, 2, 3):
        lhs = moment_distance(scaled, a, y_bar, out.weights, d)
        rhs = (4**d * (4 * alpha**2 + tail) + 2 * d * s * b / n + 2 * np.abs(noise["rho"]).sum()
               + 2 * d * noise["w"] @ np.linalg.norm(noise["r"], axis=1))
        assert lhs <= rhs  # (5.7), for every noise realisation
        assert moment_distance(scaled, a, y_true, w_true, d) <= 4**d * (4 * alpha**2 + tail)  # Thm 5.6
        # the released marginals (distinct indices) are within 2^d lhs^2 on average (Lemma 2.1)
        released = marginal_table(out.unit, d, out.weights)
        assert np.mean((marginal_table(X, d) - released) ** 2) <= 2**d * lhs**2 + 1e-15


def test_dp_rows_follow_the_release():
    """Bootstrap from wbar and Bernoulli rounding: Hoeffding radii with rate ALPHA_TEST."""
    X = factor_data(3000, 6, seed=11)
    out = run("microagg_dp", X, epsilon=5.0, t=2, n_synthetic=5000)
    sets = sum(math.comb(6, d) for d in (1, 2, 3))
    slack = 3 * hoeffding_radius(5000, sets, ALPHA_TEST / 2)
    for d in (1, 2, 3):
        assert np.max(np.abs(marginal_table(out.rows, d) - marginal_table(out.unit, d, out.weights))) <= slack


def test_index_sets_of_the_metric_are_distinct_and_sorted():
    assert len(marginal_table(np.ones((3, 6)), 3)) == len(list(combinations(range(6), 3))) == 20
