"""``rng="secure"``: a ChaCha20 generator keyed by the operating system, through the whole pipeline.

It cannot be seeded on purpose, so the tests that use it are statistical with a stated
false-failure rate (alpha = 1e-6, as OpenDP's sampler tests); the distribution tests use the
same bit generator with a fixed key so that they are reproducible.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from randomgen import ChaCha
from scipy import stats

import privsyn_core as ps
from goodness_of_fit import ALPHA, discrete_laplace_pvalue
from privsyn_core import cli
from privsyn_core.privacy.noise import discrete_laplace, resolve_rng, secure_generator


def _is_chacha20(generator: np.random.Generator) -> bool:
    state = generator.bit_generator.state
    return state["bit_generator"].endswith("ChaCha") and state["state"]["rounds"] == 20


def test_secure_generator_and_its_children_are_chacha20():
    generator, seed = resolve_rng("secure")
    assert seed is None and _is_chacha20(generator)
    assert all(_is_chacha20(child) for child in generator.spawn(3))


def test_two_secure_generators_differ():
    # Equal 256-bit outputs from two OS-keyed generators: probability 2^-256.
    a, b = secure_generator(), secure_generator()
    assert not np.array_equal(a.integers(0, 2**63, 4), b.integers(0, 2**63, 4))


def test_bad_rng_strings_are_refused():
    with pytest.raises(ValueError, match="secure"):
        resolve_rng("Secure!")


def test_synthesize_secure_is_private_unseeded_and_not_reproducible(unit_table):
    data, schema = unit_table(400, 1)
    first = ps.synthesize(data, "dp_histogram", 1.0, schema=schema, rng="secure", bins=64)
    second = ps.synthesize(data, "dp_histogram", 1.0, schema=schema, rng="secure", bins=64)
    assert first.params["seed"] is None and second.params["seed"] is None
    assert first.dp_valid and first.epsilon == 1.0
    assert len(first.data) == len(data) and first.data["x0"].between(0, 1).all()
    # 64 independent Lap_Z(2) pairs all equal: probability (sum_z pmf(z)^2)^64 < 1e-30.
    assert not np.array_equal(first.diagnostics["cells"]["noisy_count"], second.diagnostics["cells"]["noisy_count"])


def test_synthesize_secure_noise_has_the_calibrated_distribution(unit_table):
    """Noisy minus true counts over many unseeded runs fit Lap_Z(2/epsilon) (false failure 1e-6)."""
    (data, schema), epsilon = unit_table(400, 1), 1.0
    noise = np.concatenate([
        np.subtract(*[r.diagnostics["cells"][k] for k in ("noisy_count", "true_count")])
        for r in (ps.synthesize(data, "dp_histogram", epsilon, schema=schema, rng="secure", bins=50, sample="center")
                  for _ in range(60))])
    assert len(noise) == 3000
    assert discrete_laplace_pvalue(noise, 2 / epsilon) > ALPHA


def test_chacha_discrete_laplace_fits_its_pmf_fixed_key():
    generator = np.random.Generator(ChaCha(key=20261121, rounds=20))
    noise = discrete_laplace(3.0, 20_000, generator)
    assert discrete_laplace_pvalue(noise, 3.0) > ALPHA


def test_chacha_uniforms_pass_kolmogorov_smirnov_fixed_key():
    generator = np.random.Generator(ChaCha(key=7, rounds=20))
    assert stats.kstest(generator.random(20_000), "uniform").pvalue > ALPHA


def test_cli_seed_secure_reports_no_seed(tmp_path, unit_table):
    data, _ = unit_table(50, 1)
    (tmp_path / "in.csv").write_text("x\n" + "\n".join(f"{v:.3f}" for v in data[:, 0]) + "\n")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"columns": [{"name": "x", "kind": "numeric", "lo": 0, "hi": 1}]}))
    args = ["synth", str(tmp_path / "in.csv"), str(tmp_path / "out.csv"), "--mechanism", "dp_histogram",
            "--epsilon", "1", "--seed", "secure", "--schema", str(schema), "--report", str(tmp_path / "r.json")]
    assert cli.main(args) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert "seed" not in report["params"] and report["dp_valid"] is True
