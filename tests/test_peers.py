"""OpenDP's MST and AIM as optional registered peers (:mod:`privsyn_core.mechanisms.peers.opendp_support`).

Two layers.  Our wrapper (registration, public keys, ledger, null filling, decoding, the release
surface) is tested everywhere, OpenDP installed or not: the registration is driven by patching
``importlib.util.find_spec`` and OpenDP's release by a stand-in that returns keys which do not depend
on the data (so any difference between neighbours' releases is our wrapper's).  The real OpenDP runs
are in the second layer and skip, with the reason shown by ``-ra``, only where OpenDP is not installed (the
README's test command on a core install); ``.ci/run``'s peers stage installs ``requirements-peers.txt`` and sets
``PRIVSYN_REQUIRE_OPENDP=1``, under which they run and fail if OpenDP is missing.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import math
import os
import re
import signal
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_core as ps
from privsyn_core import registry
from privsyn_core.data.levelled_codec import LevelledCodec
from privsyn_core.mechanisms.base import spec as declared
from privsyn_core.mechanisms.peers import opendp_support as peers

MODULE = "privsyn_core.mechanisms.peers.opendp_peers"
SCHEMA = {"columns": [{"name": "x", "kind": "numeric", "lo": -2.0, "hi": 6.0},
                      {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
                      {"name": "k", "kind": "numeric", "lo": 0, "hi": 40, "integer": True}]}
HAS_OPENDP = peers.opendp_available()
#: Set by .ci/run's peers stage: the real-OpenDP tests may not skip there.
REQUIRE_OPENDP = os.environ.get("PRIVSYN_REQUIRE_OPENDP") == "1"
needs_opendp = pytest.mark.skipif(not (HAS_OPENDP or REQUIRE_OPENDP), reason="OpenDP is not installed (pip install "
                                  "-r requirements-peers.txt; .ci/run's peers stage tests it)")


def _table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.normal(1.0, 1.5, n), "c": rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1]),
                         "k": rng.integers(0, 41, n)})


def _rediscover(monkeypatch: pytest.MonkeyPatch, installed: bool) -> None:
    """A registry without the peers, re-discovered with OpenDP reported as installed or not."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name in peers.REQUIRED_MODULES:
            return object() if installed else None
        return real(name, *args, **kwargs)

    registry.list_mechanisms()  # the other modules are imported (and registered) once, before the swap
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(declared, "_REGISTRY", {k: v for k, v in declared._REGISTRY.items() if k not in peers.PEERS})
    monkeypatch.setattr(declared, "_MISSING", {})
    monkeypatch.setattr(registry, "_DISCOVERED", False)
    monkeypatch.delitem(sys.modules, MODULE, raising=False)


class FakeOpenDP:
    """Stands in for OpenDP's release: uniform keys from a fixed seed, with nulls at fixed places."""

    def __init__(self, null_every: int = 7) -> None:
        self.calls: list[dict] = []
        self.null_every = null_every

    def __call__(self, codes, sizes, epsilon, algorithm, neighbouring, rows, plan):
        self.calls.append({"codes": codes, "sizes": sizes, "epsilon": epsilon, "algorithm": algorithm,
                           "neighbouring": neighbouring, "rows": rows, "plan": plan})
        m = rows if rows is not None else 250  # "the model's noisy total": not a function of the data here
        keys = np.floor(np.random.default_rng(99).random((m, len(sizes))) * sizes)
        keys.flat[::self.null_every] = np.nan
        return keys


@pytest.fixture(autouse=True)
def python_handles_interrupts():
    """Python's own SIGINT handler during every test: a process started in the background by a shell without job
    control inherits SIGINT ignored, and then no interrupt test here could see its KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def fake(monkeypatch):
    """The peers registered as if OpenDP were installed, with :class:`FakeOpenDP` as its release."""
    _rediscover(monkeypatch, installed=True)
    stand_in = FakeOpenDP()
    monkeypatch.setattr(peers, "release_with_opendp", stand_in)
    return stand_in


def test_not_listed_without_opendp_and_the_note_says_how_to_install(monkeypatch):
    _rediscover(monkeypatch, installed=False)
    assert not set(peers.PEERS) & {s.name for s in ps.list_mechanisms()}
    assert registry.missing_mechanisms() == dict.fromkeys(peers.PEERS, peers.INSTALL_NOTE)
    assert "pip install -r requirements-peers.txt" in peers.INSTALL_NOTE
    with pytest.raises(ps.ParameterError, match="unknown mechanism"):
        ps.get_mechanism("opendp_mst")


def test_listed_when_installed_without_importing_opendp(monkeypatch):
    imported_before = "opendp" in sys.modules
    _rediscover(monkeypatch, installed=True)
    assert [s.name for s in ps.list_mechanisms() if s.implemented_by == "OpenDP"] == ["opendp_mst", "opendp_aim"]
    assert registry.missing_mechanisms() == {}
    assert ("opendp" in sys.modules) == imported_before, "discovery must not import OpenDP"
    for name in peers.PEERS:
        spec = ps.get_mechanism(name)
        assert spec.is_private and set(spec.neighbouring) == {"replace", "add_remove"}
        assert spec.codec is LevelledCodec and spec.floating_point_exposure is None
        assert spec.uses_n({"bins": 16}) is False  # never reads the exact n: under add/remove it is private
    assert ps.get_mechanism("opendp_aim").max_dim == sys.modules[MODULE].AIM_MAX_COLUMNS == 14


@pytest.mark.parametrize("name", peers.PEERS)
@pytest.mark.parametrize("epsilon", [0.1, 0.7, 1.0, 3.3, 1e-3])
def test_ledger_sums_exactly_to_epsilon(fake, name, epsilon):
    data = _table() if name == "opendp_mst" else _table()[["x", "c"]]
    schema = SCHEMA if name == "opendp_mst" else {"columns": SCHEMA["columns"][:2]}
    for relation in ("replace", "add_remove"):
        result = ps.synthesize(data, name, epsilon, schema=schema, neighbouring=relation, rng=1)
        assert math.fsum(e for _, e in result.ledger) == epsilon == result.epsilon
        assert all(e > 0 for _, e in result.ledger) and result.dp_valid
        assert fake.calls[-1]["epsilon"] == epsilon and fake.calls[-1]["neighbouring"] == relation


def test_openDP_split_is_what_the_ledger_records():
    mst = dict(peers.ledger("mst", 1.0, peers.MstPlan(2)))
    assert list(mst.values()) == pytest.approx([0.5, 0.05, 0.45], abs=1e-15)
    assert [e for _, e in peers.ledger("aim", 2.0)] == [1.0, 1.0]
    lowered = peers.ledger("mst", 1.0, peers.MstPlan(7, 0.899))
    assert [e for _, e in lowered] == pytest.approx([0.5, 0.0505, 0.4495], abs=1e-15)
    assert "7 rounds" in lowered[1][0] and math.fsum(e for _, e in lowered) == 1.0
    with pytest.raises(ValueError, match="plan"):
        peers.ledger("mst", 1.0)


def test_keys_come_from_the_public_schema(fake):
    data = _table()
    data.loc[0, "x"], data.loc[1, "x"] = -50.0, 50.0  # outside the public bounds: clipped to the end bins
    ps.synthesize(data, "opendp_mst", 1.0, schema=SCHEMA, rng=2, bins=8)
    call = fake.calls[-1]
    assert call["sizes"] == [8, 3, 8] and call["algorithm"] == "mst"
    codes = call["codes"]
    assert codes.dtype == np.int64 and codes.shape == (len(data), 3)
    expected_x = np.minimum(((np.clip(data["x"], -2, 6) + 2) / 8 * 8).astype(int), 7)
    np.testing.assert_array_equal(codes[:, 0], expected_x)
    assert codes[0, 0] == 0 and codes[1, 0] == 7
    np.testing.assert_array_equal(codes[:, 1], data["c"].map({"a": 0, "b": 1, "c": 2}))
    np.testing.assert_array_equal(codes[:, 2], np.minimum((data["k"] / 40 * 8).astype(int), 7))


def test_output_rows_respect_the_schema_and_the_relation(fake):
    data = _table(300)
    replace = ps.synthesize(data, "opendp_mst", 1.0, schema=SCHEMA, neighbouring="replace", rng=3)
    assert fake.calls[-1]["rows"] == 300  # n is public under replace-one
    added = ps.synthesize(data, "opendp_mst", 1.0, schema=SCHEMA, neighbouring="add_remove", rng=3)
    assert fake.calls[-1]["rows"] is None and len(added.data) == 250  # the model's total, never len(data)
    asked = ps.synthesize(data, "opendp_mst", 1.0, schema=SCHEMA, neighbouring="add_remove", rng=3, n_synthetic=57)
    assert fake.calls[-1]["rows"] == 57 and len(asked.data) == 57
    for result in (replace, added, asked):
        out = result.data
        assert list(out.columns) == ["x", "c", "k"] and out["k"].dtype == np.int64 and out["x"].dtype == float
        assert out["x"].between(-2, 6).all() and out["k"].between(0, 40).all()
        assert set(out["c"]) <= {"a", "b", "c"}


def test_null_cells_are_filled_uniformly_and_counted(fake):
    result = ps.synthesize(_table(), "opendp_mst", 1.0, schema=SCHEMA, neighbouring="add_remove", rng=4,
                           n_synthetic=6000)
    nulls = len(range(0, 6000 * 3, 7))
    assert peers.null_warning(nulls, 6000 * 3) in result.warnings and result.diagnostics["null_cells"] == nulls
    assert peers.null_warning(nulls, 6000 * 3) in result.release().to_dict()["warnings"]
    # the filled category cells are uniform on the public categories (chi-square; false failure 1e-6)
    holes = np.zeros(6000 * 3, dtype=bool)
    holes[::7] = True
    filled_c = result.data["c"].to_numpy()[holes.reshape(6000, 3)[:, 1]]
    counts = pd.Series(filled_c).value_counts().reindex(["a", "b", "c"], fill_value=0).to_numpy()
    assert stats.chisquare(counts).pvalue > 1e-6


def test_public_atoms_get_a_key_each_and_decode_to_themselves(fake):
    """A zero-inflated amount keyed as a careful user would: one key for each public atom, ``bins`` equal bins of
    the continuous part (atom_layout puts the atoms in [0, 1/2) and the rest on [1/2, 1])."""
    schema = {"columns": [{"name": "amount", "kind": "numeric", "lo": 0.0, "hi": 80.0, "atoms": [0, 80]},
                          {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]}]}
    rng = np.random.default_rng(3)
    amount = np.where(rng.random(600) < 0.5, 0.0, rng.uniform(0, 80, 600))
    amount[:20] = 80.0
    data = pd.DataFrame({"amount": amount, "c": rng.choice(["a", "b", "c"], 600)})
    result = ps.synthesize(data, "opendp_mst", 1.0, schema=schema, rng=4, bins=8, n_synthetic=5000)
    call = fake.calls[-1]
    assert call["sizes"] == [2 + 8, 3]
    expected = np.where(amount == 0, 0, np.where(amount == 80, 1, 2 + np.minimum(amount / 10, 7).astype(int)))
    np.testing.assert_array_equal(call["codes"][:, 0], expected)
    # FakeOpenDP's uniform keys: each atom key decodes to its atom, each bin key to a uniform value in its bin
    out = result.data["amount"].to_numpy()
    # keys 0 and 1 (the atoms) each hold a tenth of the uniform keys: Binomial(5000, 0.1), beyond 6 sd w.p. < 1e-8
    for atom in (0.0, 80.0):
        assert abs(np.sum(out == atom) - 500) < 6 * math.sqrt(5000 * 0.1 * 0.9)
    inner = out[(out > 0) & (out < 80)]
    assert stats.kstest(inner, stats.uniform(loc=0, scale=80).cdf).pvalue > 1e-6  # false failure 1e-6


def test_a_bin_decodes_uniformly_inside_itself(monkeypatch, fake):
    monkeypatch.setattr(peers, "release_with_opendp",
                        lambda codes, sizes, *a, rows, plan: np.tile([3.0, 1.0, 0.0], (rows, 1)))
    out = ps.synthesize(_table(), "opendp_mst", 1.0, schema=SCHEMA, rng=5, bins=8, n_synthetic=4000).data
    x = out["x"].to_numpy()
    assert np.all((x >= 1.0) & (x <= 2.0))  # bin 3 of [-2, 6] cut into 8
    assert stats.kstest(x, stats.uniform(loc=1.0, scale=1.0).cdf).pvalue > 1e-6  # false failure 1e-6
    assert set(out["c"]) == {"b"} and set(out["k"]) <= {0, 1, 2, 3, 4, 5}


def test_same_seed_replays_the_post_processing(fake):
    a = ps.synthesize(_table(), "opendp_mst", 1.0, schema=SCHEMA, rng=11, n_synthetic=37)
    b = ps.synthesize(_table(), "opendp_mst", 1.0, schema=SCHEMA, rng=11, n_synthetic=37)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert peers.SEED_NOTE in a.warnings


def test_a_seeded_peer_release_says_once_that_its_noise_is_not_replayed(fake):
    """OpenDP draws the noise: a seeded release states that the seed replays only the post-processing, and does
    not also claim (as a release whose noise privsyn_core draws does) that the seed replays the noise."""
    from privsyn_core.reporting.report import cli_note
    from privsyn_core.result import SEED_WARNING

    result = ps.synthesize(_table(), "opendp_mst", 1.0, schema=SCHEMA, rng=11, n_synthetic=37)
    warnings = result.report()["warnings"]
    assert result.release().noise_source == "OpenDP"
    assert warnings.count(peers.SEED_NOTE) == 1 and SEED_WARNING not in warnings
    assert not [w for w in warnings if "seed" in w and w != peers.SEED_NOTE]
    assert "cannot replay" in cli_note(result.release())
    ours = ps.synthesize(_table(), "psmm", 1.0, schema=SCHEMA, rng=11, n_synthetic=37)
    assert SEED_WARNING in ours.report()["warnings"] and ours.release().noise_source is None
    assert "give the same rows" in cli_note(ours.release())


@pytest.mark.parametrize("name, d, message", [("opendp_mst", 1, "at least 2"),  # the peer's own check
                                              # the registry's max_dim, enforced by the pipeline
                                              ("opendp_aim", 15, r"at most 14 encoded column")])
def test_width_is_refused_before_opendp_runs(fake, name, d, message):
    schema = {"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0.0, "hi": 1.0} for j in range(d)]}
    data = pd.DataFrame(np.random.default_rng(0).random((50, d)), columns=[f"x{j}" for j in range(d)])
    with pytest.raises(ps.ParameterError, match=message):
        ps.synthesize(data, name, 1.0, schema=schema, rng=1)
    assert fake.calls == []


def _masked(release: dict) -> dict:
    """The release's metadata with the count of filled null cells masked: a function of the noisy rows, which
    OpenDP's unseedable noise makes differ between any two runs (neighbours or not)."""
    text = re.sub(r"^\d+ of \d+ synthetic cells were null", "N of M synthetic cells were null",
                  "\n".join(release["warnings"]), flags=re.MULTILINE)
    return {**{k: v for k, v in release.items() if k not in ("warnings", "n_synthetic")}, "warnings": text}


def _surface(name: str, relation: str, public_n: int | None, mask: bool, d: int = 2) -> None:
    from test_release_surface import EPSILON, SEED, _pairs

    for label, (before, after, schema) in _pairs(relation, d).items():
        seen = []
        for data in (before, after):
            result = ps.synthesize(data, name, EPSILON, schema=schema, neighbouring=relation, rng=SEED,
                                   public_n=public_n)
            release = result.release().to_dict()
            release.pop("n_synthetic")  # noise-derived (under add/remove a noisy count)
            seen.append((_masked(release) if mask else release, [str(t) for t in result.data.dtypes]))
        assert seen[0] == seen[1], f"{name}, {relation}: {label}"


@pytest.mark.parametrize("name", peers.PEERS)
@pytest.mark.parametrize("relation, public_n", [("replace", None), ("add_remove", None), ("add_remove", 600)])
@pytest.mark.parametrize("d", [2, 9])
def test_release_surface_of_the_wrapper(fake, name, relation, public_n, d):
    """The crafted neighbours of tests/test_release_surface.py: with OpenDP's release replaced by keys that
    ignore the data, every released field of our wrapper is identical (including the null count, and on 9
    columns MST's deviation from OpenDP's defaults)."""
    fake.null_every = 5
    _surface(name, relation, public_n, mask=False, d=d)


# -- MST's plan: what OpenDP 0.16 accepts (epsilon and d only) ----------------------------------------------


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.3])
def test_mst_plan_keeps_openDP_defaults_wherever_they_pass(epsilon):
    for d in range(2, 8):  # up to 6 rounds OpenDP's own split composes at these epsilons
        assert peers.mst_plan(epsilon, d) == peers.MstPlan(d - 1)
        assert peers.mst_deviation(peers.MstPlan(d - 1), d) == []
    # 8 rounds never compose (the rounded-up sum of 8 x prior(x/8) exceeds x): 9 columns get 7 selections
    assert not peers.mst_accepts(epsilon, peers.MstPlan(8))
    nine = peers.mst_plan(epsilon, 9)
    assert nine.selections == 7 and 0.899 <= nine.measure_split <= 0.9
    # 9 rounds compose with measure_split a few steps of 1e-6 below 0.9, where OpenDP's 0.9 is refused
    ten = peers.mst_plan(epsilon, 10)
    assert ten.selections == 9 and 0.899 <= ten.measure_split < 0.9
    assert not peers.mst_accepts(epsilon, peers.MstPlan(9))


def test_every_mst_plan_is_accepted_and_as_close_to_MST_as_possible():
    for d in range(2, 41):
        for epsilon in (0.25, 1.0, 4.0):
            plan = peers.mst_plan(epsilon, d)
            assert peers.mst_accepts(epsilon, plan) and d - 3 <= plan.selections <= d - 1
            wider = [peers.MstPlan(k, peers.MST_MEASURE_SPLIT - i * peers.MST_SPLIT_STEP)
                     for k in range(plan.selections + 1, d) for i in range(0, peers.MST_SPLIT_STEPS, 37)]
            assert not any(peers.mst_accepts(epsilon, w) for w in wider)


@needs_opendp
def test_the_rounded_up_sum_is_openDPs_composition():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    rng = np.random.default_rng(5)
    domain, metric = dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()
    for _ in range(300):
        part, count = float(rng.random() * 10 ** rng.uniform(-4, 1)), int(rng.integers(1, 40))
        composed = dp.c.make_adaptive_composition(domain, metric, dp.max_divergence(), d_in=1, d_mids=[part] * count)
        assert peers._rounded_up_sum(part, count) == composed.map(1), (part, count)


def test_nine_columns_warn_about_the_forest_and_the_ledger_says_so(fake):
    schema = {"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0.0, "hi": 1.0} for j in range(9)]}
    data = pd.DataFrame(np.random.default_rng(0).random((300, 9)), columns=[f"x{j}" for j in range(9)])
    result = ps.synthesize(data, "opendp_mst", 1.0, schema=schema, rng=1)
    assert fake.calls[-1]["plan"] == peers.MstPlan(7)
    assert peers.mst_deviation(peers.MstPlan(7), 9)[0] in result.release().to_dict()["warnings"]
    assert "7 rounds" in result.ledger[1][0] and math.fsum(e for _, e in result.ledger) == 1.0
    three = ps.synthesize(_table(), "opendp_mst", 1.0, schema=SCHEMA, rng=1)
    assert fake.calls[-1]["plan"] == peers.MstPlan(2) and not any("opendp/opendp#2789" in w for w in three.warnings)


# -- interrupts and refusals: OpenDP's callbacks simulated --------------------------------------------------


class FakeOpenDPException(Exception):
    def __init__(self, variant: str, message: str) -> None:
        super().__init__(variant, message)
        self.variant, self.message = variant, message


class CallbackRun:
    """Stands in for OpenDP's run: a Python step called "from Rust", as ``_invoke_py_callback`` calls it.

    An ``Exception`` from the step comes back as an OpenDPException; anything else would abort the process in
    OpenDP (ctypes drops it and Rust frees an invalid pointer), which is recorded in ``aborted``.
    """

    def __init__(self, step) -> None:
        self.step, self.aborted, self.runs = step, [], 0

    def __call__(self, dp, codes, sizes, epsilon, algorithm, neighbouring, rows, plan):
        self.runs += 1
        try:
            self.step()
        except Exception as exc:
            raise dp.OpenDPException("FFI", f"Continued stack trace from Exception in user-defined function:\n"
                                            f"Traceback ...\n{type(exc).__name__}: {exc}") from None
        except BaseException as exc:
            self.aborted.append(exc)
            raise
        return np.zeros((rows or 5, len(sizes)))


@pytest.fixture
def opendp_module(monkeypatch):
    """A stand-in ``opendp.prelude`` holding OpenDPException (the real one need not be installed)."""
    prelude = type(sys)("opendp.prelude")
    prelude.OpenDPException = FakeOpenDPException
    package = type(sys)("opendp")
    package.prelude = prelude
    for module in (package, prelude):  # a spec, as an imported module has (importlib.util.find_spec reads it)
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    monkeypatch.setitem(sys.modules, "opendp", package)
    monkeypatch.setitem(sys.modules, "opendp.prelude", prelude)
    return prelude


def _release(run: CallbackRun, monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    monkeypatch.setattr(peers, "_run_opendp", run)
    return peers.release_with_opendp(np.zeros((5, 2), np.int64), [2, 2], 1.0, "mst", "replace", rows=5,
                                     plan=peers.MstPlan(1))


class Timeout(Exception):
    """What a caller's SIGALRM handler raises (as benchmarks/bench_real_tables.py does)."""


class Terminated(BaseException):
    """What a caller's SIGTERM handler raises (as privsyn_core.cli does)."""


def _raise(exc):
    def handler(signum, frame):
        raise exc
    return handler


@pytest.mark.parametrize("signum, handler, expected", [
    (signal.SIGINT, signal.default_int_handler, KeyboardInterrupt),
    (signal.SIGTERM, _raise(Terminated()), Terminated),
    (signal.SIGALRM, _raise(Timeout("stopped after 600 s")), Timeout)])
def test_an_interrupt_inside_openDP_propagates_as_itself(monkeypatch, opendp_module, signum, handler, expected):
    previous = signal.signal(signum, handler)
    try:
        run = CallbackRun(lambda: signal.raise_signal(signum))
        with pytest.raises(expected):
            _release(run, monkeypatch)
        assert run.aborted == [], "a BaseException reached OpenDP's callback: OpenDP would abort the process"
        assert signal.getsignal(signum) is handler  # restored
        run.step = lambda: None  # nothing crashed: the next run goes through
        assert _release(run, monkeypatch).shape == (5, 2) and run.runs == 2
    finally:
        signal.signal(signum, previous)


def test_without_the_guard_the_simulated_openDP_would_abort():
    """The detection case: the stand-in does see a KeyboardInterrupt raised in a callback without the guard."""
    run = CallbackRun(lambda: signal.raise_signal(signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        run(FakeOpenDPException, None, [2], 1.0, "mst", "replace", 5, None)
    assert len(run.aborted) == 1


def test_an_interrupt_outside_openDPs_callbacks_propagates_too(monkeypatch, opendp_module):
    def between_steps(*args):
        signal.raise_signal(signal.SIGINT)
        raise AssertionError("not reached")

    monkeypatch.setattr(peers, "_run_opendp", between_steps)
    with pytest.raises(KeyboardInterrupt):
        peers.release_with_opendp(np.zeros((5, 2), np.int64), [2, 2], 1.0, "aim", "replace", rows=5, plan=None)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupt_propagates_through_synthesize(monkeypatch, opendp_module):
    _rediscover(monkeypatch, installed=True)
    monkeypatch.setattr(peers, "_run_opendp", CallbackRun(lambda: signal.raise_signal(signal.SIGINT)))
    with pytest.raises(KeyboardInterrupt):
        ps.synthesize(_table(), "opendp_mst", 1.0, schema=SCHEMA, rng=1)


def test_only_openDPs_refusal_gets_the_budget_message_with_its_reason(monkeypatch, opendp_module):
    refusal = ('Continued stack trace from Exception in user-defined function:\nTraceback ...\n  File "x.py", line 3\n'
               'ValueError: value 0.123456 of row 17\n'
               'opendp.mod.OpenDPException:\n  FailedFunction("insufficient budget for query: 0.05 > 0.049")\n")')

    def refuse():
        raise FakeOpenDPException("FFI", refusal)

    monkeypatch.setattr(peers, "_run_opendp", lambda *a: refuse())
    with pytest.raises(ps.PrivsynError) as caught:
        _release(CallbackRun(refuse), monkeypatch)
    message = str(caught.value)
    assert message == ("OpenDP's MST refused to run under pure epsilon-DP at epsilon 1 (FailedFunction: insufficient "
                       "budget for query: 0.05 > 0.049)")
    assert "0.123456" not in message and "row 17" not in message  # the tracebacks around the refusal are dropped
    assert peers.opendp_reason(FakeOpenDPException("FFI", "no variant here")) == "FFI"
    # a Python error that is no refusal and no interrupt stays itself
    monkeypatch.setattr(peers, "_run_opendp", lambda *a: (_ for _ in ()).throw(MemoryError("out of memory")))
    with pytest.raises(MemoryError):
        peers.release_with_opendp(np.zeros((5, 2), np.int64), [2, 2], 1.0, "aim", "replace", rows=5, plan=None)


# -- the real OpenDP (skips only where it is not installed) ------------------------------------------------


@needs_opendp
@pytest.mark.slow
@pytest.mark.parametrize("name, columns", [("opendp_mst", ["x", "c", "k"]), ("opendp_aim", ["x", "c", "k"])])
def test_real_opendp_release_respects_schema_and_ledger(name, columns):
    schema = {"columns": [c for c in SCHEMA["columns"] if c["name"] in columns]}
    result = ps.synthesize(_table(500)[columns], name, 1.0, schema=schema, neighbouring="add_remove")
    assert math.fsum(e for _, e in result.ledger) == 1.0 and result.dp_valid
    out = result.data
    assert list(out.columns) == columns and out["x"].between(-2, 6).all() and set(out["c"]) <= {"a", "b", "c"}
    assert 350 <= len(out) <= 650  # the model's noisy total around n = 500 (Laplace on counts at eps/2)
    nulls = result.diagnostics["null_cells"]
    assert peers.null_warning(nulls, out.size) in result.warnings
    # the released marginal of c follows the data's (0.6, 0.3, 0.1): sampling 500 rows moves a share by more
    # than 0.1 with probability <= 2 exp(-2 * 500 * 0.01) < 1e-4 (Hoeffding), OpenDP's count noise (scale about
    # 4/500 of a share) adds little, while a wrapper that scrambled the categories (uniform) has TVD 0.27
    shares = out["c"].value_counts(normalize=True).reindex(["a", "b", "c"], fill_value=0).to_numpy()
    assert 0.5 * np.abs(shares - [0.6, 0.3, 0.1]).sum() < 0.15


@needs_opendp
@pytest.mark.slow
def test_real_opendp_release_surface_on_the_empty_region_pair():
    from test_release_surface import EPSILON, SEED, _pairs

    before, after, schema = _pairs("add_remove", 2)["record added in an empty region"]
    seen = [_masked(ps.synthesize(d, "opendp_mst", EPSILON, schema=schema, neighbouring="add_remove",
                                  rng=SEED).release().to_dict()) for d in (before, after)]
    assert seen[0] == seen[1]


def test_the_module_registers_nothing_twice(monkeypatch):
    _rediscover(monkeypatch, installed=True)
    ps.list_mechanisms()
    with pytest.raises(RuntimeError, match="registered twice"):
        importlib.reload(sys.modules[MODULE])


def _wide(d: int, n: int = 400) -> tuple[pd.DataFrame, dict]:
    """``d`` correlated three-category columns (each a noisy copy of the first)."""
    rng = np.random.default_rng(d)
    base = rng.integers(0, 3, n)
    columns = {f"c{j}": np.where(rng.random(n) < 0.7, base, rng.integers(0, 3, n)).astype(str) for j in range(d)}
    schema = {"columns": [{"name": name, "kind": "categorical", "categories": ["0", "1", "2"]} for name in columns]}
    return pd.DataFrame(columns), schema


@needs_opendp
@pytest.mark.slow
@pytest.mark.parametrize("d", [9, 10])
def test_real_mst_runs_on_nine_and_ten_columns(d):
    """OpenDP 0.16's own MST refuses these widths at epsilon 1 (its split of 8 or 9 selection rounds)."""
    data, schema = _wide(d)
    assert not peers.mst_accepts(1.0, peers.MstPlan(d - 1))
    result = ps.synthesize(data, "opendp_mst", 1.0, schema=schema, neighbouring="add_remove")
    assert math.fsum(e for _, e in result.ledger) == 1.0 and result.dp_valid
    assert peers.mst_deviation(peers.mst_plan(1.0, d), d)[0] in result.warnings
    assert list(result.data.columns) == list(data.columns)


@needs_opendp
@pytest.mark.slow
def test_real_interrupt_propagates_and_openDP_still_works():
    """SIGINT during a real MST run: KeyboardInterrupt, not a budget message, and no abort of the process (a
    KeyboardInterrupt inside OpenDP's callbacks aborts it: "free(): invalid pointer")."""
    import os
    import threading

    import opendp.prelude as dp

    data, schema = _wide(6, 2000)
    timer = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            ps.synthesize(data, "opendp_mst", 1.0, schema=schema, neighbouring="add_remove")
    finally:
        timer.cancel()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    dp.enable_features("contrib")
    assert dp.m.make_randomized_response_bool(0.75)(True) in (True, False)


@needs_opendp
@pytest.mark.slow
def test_real_aim_ends_at_the_residue_instead_of_failing(monkeypatch):
    """OpenDP 0.16's own AIM then starts a round with the residue (about 5e-17 of epsilon 1 here) and fails on a
    zero selection budget; FinishingAIM's rounds all have a real budget and the release goes through."""
    from opendp.extras.mbi import _aim

    from privsyn_core.mechanisms.peers import _opendp_aim

    budgets = []
    step = _aim._make_aim_marginal

    def recorded(*args, **kwargs):
        budgets.append(args[4])  # d_out of the round
        return step(*args, **kwargs)

    monkeypatch.setattr(_aim, "_make_aim_marginal", recorded)
    rng = np.random.default_rng(0)
    data = pd.DataFrame({f"x{j}": rng.random(1400) for j in range(3)})
    schema = {"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0.0, "hi": 1.0} for j in range(3)]}
    result = ps.synthesize(data, "opendp_aim", 1.0, schema=schema, neighbouring="add_remove")
    assert len(result.data) > 0 and math.fsum(e for _, e in result.ledger) == 1.0
    assert len(budgets) >= 2 and min(budgets) > _opendp_aim.RESIDUE * 0.5  # rounds share the other half
