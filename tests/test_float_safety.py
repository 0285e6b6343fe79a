"""Floating-point exposure is declared truthfully, both ways (issue: reliability and security, item 2).

Two levels.

1. The sampler.  The count noise functions (:func:`~privsyn_core.privacy.noise.discrete_laplace`,
   :func:`~privsyn_core.privacy.noise.fill_discrete_laplace`, :func:`~privsyn_core.privacy.noise.discrete_geometric`,
   and kd_grid's conditional draws for its implicit empty cells,
   :func:`~privsyn_core.mechanisms.kdtree.kd_empty.conditional_weights`) must run on a generator every one of
   whose float-valued samplers raises (:data:`FLOAT_SAMPLERS`: all the public methods of
   ``numpy.random.Generator`` but ``integers``, ``bytes`` and ``spawn``; raw bits come from
   ``bit_generator.random_raw``).  Detection case: the previous sampler (``ceil(E / L)`` from
   ``standard_exponential``) and one that calls ``random()`` raise on that generator.
2. The mechanisms.  A mechanism whose spec says ``floating_point_exposure is None`` claims that its count noise
   is exact integer noise.  Post-processing (rows drawn uniformly inside released cells, consistency splits)
   may use ``random()``, so the whole run cannot be forbidden floats.  The two are told apart by *when* the
   generator is called: :func:`count_noise_scope` wraps the noise functions above, wherever a module imported
   them (as :func:`privsyn_core.evaluation.audit.scaled_noise` does), and while one of them runs every float
   sampler raises; outside them only the continuous noise samplers (:data:`CONTINUOUS_SAMPLERS`) raise, as
   before.  The scope covers every draw made inside the noise functions and nothing else: a mechanism that drew
   count noise with its own float code outside them would pass level 2 (the continuous samplers are still
   caught); ``binomial_big`` (the number of kd_grid's implicit empty cells that pass the threshold, a binomial
   with a float probability) is such a draw and is not covered.  Detection case: with a float-based
   sampler put in place of the implementation, the declared-safe mechanisms fail.
   A mechanism that declares an exposure must actually draw continuous noise (so the app's warning is not stale).
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.mechanisms.kdtree import kd_empty
from privsyn_core.privacy import noise
from privsyn_core.privacy.accounting import ledger_total

CONTINUOUS_SAMPLERS = ("laplace", "exponential", "standard_exponential", "normal", "standard_normal", "gumbel",
                       "logistic", "standard_cauchy", "standard_t", "gamma", "standard_gamma")
#: Generator methods that need no float: bounded integers (integer rejection), raw bytes, child generators.
INTEGER_METHODS = ("integers", "bytes", "spawn")
#: Every other public method of ``numpy.random.Generator`` (``random``, ``uniform``, ``geometric``, ``binomial``,
#: ``choice``, ``permutation``, ``shuffle``, every continuous law, ...).
FLOAT_SAMPLERS = tuple(name for name in dir(np.random.Generator) if not name.startswith("_")
                       and callable(getattr(np.random.Generator, name)) and name not in INTEGER_METHODS)
#: The count noise functions of level 2 (module docstring): ``(home module, name)``.
NOISE_FUNCTIONS = (("noise", "discrete_laplace"), ("noise", "fill_discrete_laplace"), ("noise", "discrete_geometric"),
                   ("kd_empty", "conditional_weights"))


class ContinuousNoiseDrawn(AssertionError):
    """A float sampler was called where it is forbidden."""


class _Scope:
    """How many count noise functions are running (level 2 of the module docstring)."""

    depth = 0


def _forbidden(name: str, always: bool):
    def sampler(self, *args, **kwargs):
        if always or _Scope.depth or isinstance(self, FloatFreeGenerator):
            raise ContinuousNoiseDrawn(name)
        return getattr(np.random.Generator, name)(self, *args, **kwargs)
    return sampler


#: A Generator whose continuous samplers always raise and whose other float samplers raise inside
#: :func:`count_noise_scope`; ``spawn`` keeps the subclass, so children inherit it.
IntegerOnlyGenerator = type("IntegerOnlyGenerator", (np.random.Generator,),
                            {name: _forbidden(name, name in CONTINUOUS_SAMPLERS) for name in FLOAT_SAMPLERS})
#: A Generator all of whose float samplers raise, always (level 1).
FloatFreeGenerator = type("FloatFreeGenerator", (IntegerOnlyGenerator,), {})


@contextlib.contextmanager
def count_noise_scope() -> Iterator[None]:
    """Wrap :data:`NOISE_FUNCTIONS` in :mod:`privsyn_core.privacy.noise` and in every module that imported them by
    name, so that :class:`IntegerOnlyGenerator` forbids every float sampler while one of them runs."""
    homes = {"noise": noise, "kd_empty": kd_empty}
    originals = {name: getattr(homes[home], name) for home, name in NOISE_FUNCTIONS}

    def scoped(function):
        def wrapper(*args, **kwargs):
            _Scope.depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                _Scope.depth -= 1
        return wrapper

    wrapped = {name: scoped(fn) for name, fn in originals.items()}
    patched = [(module, name) for module in list(sys.modules.values()) if isinstance(module, ModuleType)
               for name, fn in originals.items() if vars(module).get(name) is fn]
    try:
        for module, name in patched:
            setattr(module, name, wrapped[name])
        yield
    finally:
        for module, name in patched:
            setattr(module, name, originals[name])


def float_sampler(out: np.ndarray, sigma: float, rng: np.random.Generator, *, add: bool = False,
                  clip_at_zero: bool = False, sampler: str = "inversion") -> None:
    """The previous implementation (detection case): magnitudes ``ceil(E / L) - 1`` from float exponentials."""
    rate = -math.log1p(math.expm1(-1.0 / sigma))
    index = np.arange(len(out))
    draws = np.zeros(len(out), dtype=np.int64)
    while len(index):
        magnitude = (np.ceil(rng.standard_exponential(len(index)) / rate) - 1).astype(np.int64)
        sign = rng.integers(0, 2, len(index))
        draws[index] = np.where(sign == 1, -magnitude, magnitude)
        index = index[(sign == 1) & (magnitude == 0)]
    out[:] = out + draws if add else draws
    if clip_at_zero:
        np.maximum(out, 0, out=out)


def uniform_sampler(out: np.ndarray, sigma: float, rng: np.random.Generator, *, add: bool = False,
                    clip_at_zero: bool = False, sampler: str = "inversion") -> None:
    """A sampler calling ``random()`` (detection case): inverse CDF of the discrete Laplace law in floats."""
    u = rng.random(len(out))
    p = math.exp(-1.0 / sigma)
    magnitude = np.floor(np.log(np.abs(2 * u - 1) * (1 + p) / 2 + (1 - p) / 2) / math.log(p)).astype(np.int64)
    draws = np.where(u < 0.5, -magnitude, magnitude)
    out[:] = out + draws if add else draws
    if clip_at_zero:
        np.maximum(out, 0, out=out)


@pytest.mark.parametrize("sigma", [1e-4, 0.25, 1.0, 1 / 0.3, 1000.0, 1e12])
def test_the_sampler_draws_no_float(sigma):
    """Level 1: the noise functions run to the end on a generator whose every float sampler raises, and the
    draws follow the law of the same seed on an ordinary generator (the forbidding changes nothing)."""
    draws = noise.discrete_laplace(sigma, 50_000, FloatFreeGenerator(np.random.PCG64(7)))
    assert np.array_equal(draws, noise.discrete_laplace(sigma, 50_000, np.random.default_rng(7)))
    counts = np.full(3 * noise.NOISE_CHUNK, 5, dtype=np.int64)
    noise.fill_discrete_laplace(counts, sigma, FloatFreeGenerator(np.random.PCG64(8)), add=True, clip_at_zero=True)
    assert counts.min() >= 0
    assert noise.discrete_geometric(sigma, 1000, FloatFreeGenerator(np.random.PCG64(9))).min() >= 0
    assert kd_empty.conditional_weights(3, sigma, 1000, FloatFreeGenerator(np.random.PCG64(9))).min() >= 3


@pytest.mark.parametrize("sampler", [float_sampler, uniform_sampler])
def test_the_sampler_check_detects_float_samplers(sampler):
    """Level 1 detection case: the same check fails on the previous float sampler and on one using random()."""
    with pytest.raises(ContinuousNoiseDrawn):
        sampler(np.zeros(1000, dtype=np.int64), 3.0, FloatFreeGenerator(np.random.PCG64(7)))


def test_the_forbidding_generators_and_their_children():
    rng = IntegerOnlyGenerator(np.random.PCG64(1))
    for generator in (rng, *rng.spawn(2)):
        assert isinstance(generator, IntegerOnlyGenerator)
        with pytest.raises(ContinuousNoiseDrawn):
            generator.laplace(0.0, 1.0)
        assert 0 <= generator.random() < 1 and generator.geometric(0.5) >= 1  # post-processing outside the scope
        _Scope.depth += 1  # as inside a count noise function
        try:
            with pytest.raises(ContinuousNoiseDrawn):
                generator.random()
        finally:
            _Scope.depth -= 1
        assert 0 <= generator.integers(0, 10) < 10
    free = FloatFreeGenerator(np.random.PCG64(2))
    for name in ("random", "uniform", "geometric", "binomial", "choice", "permutation"):
        with pytest.raises(ContinuousNoiseDrawn):
            getattr(free, name)(2)
    assert {"random", "uniform", "geometric", "normal", "exponential", "shuffle"} <= set(FLOAT_SAMPLERS)


PRIVATE = [s for s in ps.list_mechanisms() if s.is_private]
#: Our mechanisms that declare no floating-point exposure; a peer implemented by another library (OpenDP draws its
#: noise with its own exact samplers, not with privsyn_core.privacy.noise) is that library's claim, not tested here.
DECLARED_SAFE = [s for s in PRIVATE if s.floating_point_exposure is None and s.implemented_by is None]


def _data(spec: ps.MechanismSpec):
    if spec.data_kind == "boolean":
        X = (np.random.default_rng(0).random((400, 6)) < 0.3).astype(int)
        return X, ps.Schema.from_dict({"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0, "hi": 1,
                                                    "integer": True} for j in range(6)]})
    d = spec.max_dim or 3  # three columns: marginal_tree selects its tree (its Gumbel draws) only from d = 3
    return two_blobs(400, d, rng=0), ps.unit_schema(d)


def _run(spec: ps.MechanismSpec, params: dict | None = None, neighbouring: str = "replace"):
    X, schema = _data(spec)
    if neighbouring not in spec.neighbouring:
        neighbouring = spec.neighbouring[0]
    return ps.synthesize(X, spec.name, 1.0, schema=schema, rng=IntegerOnlyGenerator(np.random.PCG64(0)),
                         neighbouring=neighbouring, **(params or {}))


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
@pytest.mark.parametrize("spec", DECLARED_SAFE, ids=lambda s: s.name)
def test_mechanisms_declared_safe_draw_count_noise_without_floats(spec, neighbouring):
    """Level 2: no continuous sampler anywhere, no float sampler inside the count noise functions (add/remove
    includes the noisy record count of the pipeline), and the noise functions were called."""
    calls = []
    with count_noise_scope():
        original = noise._fill_discrete_laplace

        def counted(*args, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(noise, "_fill_discrete_laplace", counted)
            result = _run(spec, neighbouring=neighbouring)
    assert len(result.data) > 0 and ledger_total(result.ledger) == 1.0 and calls


@pytest.mark.parametrize("sampler", [float_sampler, uniform_sampler])
@pytest.mark.parametrize("spec", DECLARED_SAFE, ids=lambda s: s.name)
def test_level_two_detects_a_float_sampler(spec, sampler, monkeypatch):
    """Level 2 detection case: the implementation replaced by a float sampler (exponential draws, or random()
    alone, which is allowed outside the noise functions) makes every declared-safe mechanism fail."""
    monkeypatch.setattr(noise, "_fill_discrete_laplace", sampler)
    with count_noise_scope(), pytest.raises(ContinuousNoiseDrawn):
        _run(spec)


#: Parameters that exercise the machinery a declaration is about, where the audit case's do not: microagg_dp's
#: Bingham sampler runs only with a private PCA (t >= 1).
EXPOSED_PARAMS = {"microagg_dp": {"t": 1}}


@pytest.mark.parametrize("spec", [s for s in PRIVATE if s.floating_point_exposure], ids=lambda s: s.name)
def test_mechanisms_declared_exposed_do_draw_continuous_noise(spec):
    """Run with the audit case's parameters, which exercise the private machinery the declaration is about
    (marginal_tree's tree selection; on 2-3 numeric columns its default releases the joint with psmm instead)."""
    params = EXPOSED_PARAMS.get(spec.name, dict(spec.audit.params) if spec.audit is not None else None)
    with pytest.raises(ContinuousNoiseDrawn):
        _run(spec, params)


def test_microagg_dp_draws_its_laplace_noise_without_floats():
    """microagg_dp's weights and centres get exact lattice noise: without the private PCA (t = 0) the run draws
    no float inside the noise functions and no continuous sampler anywhere; its exposure is the Bingham sampler."""
    spec = ps.get_mechanism("microagg_dp")
    with count_noise_scope():
        result = _run(spec, {"t": 0})
    assert len(result.data) > 0 and ledger_total(result.ledger) == 1.0
