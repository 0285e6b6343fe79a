r"""The field's standard beside ours: OpenDP's MST and AIM as optional registered mechanisms.

``opendp_mst`` and ``opendp_aim`` (:mod:`privsyn_core.mechanisms.peers.opendp_peers`) are registered only
when OpenDP with its ``mbi`` extra is importable (``pip install -r requirements-peers.txt``); the
library works without it, and they are then declared missing with :data:`INSTALL_NOTE`
(:func:`privsyn_core.registry.missing_mechanisms`).  OpenDP is imported lazily, inside a run, never when the
registry is discovered.

What a peer sees is what our mechanisms see, from the public schema alone: every continuous numeric column
is cut into ``bins`` equal bins of its public interval ``[lo, hi]`` (values clipped into it, as
:meth:`privsyn_core.Schema.encode` does; 32 by default, chosen by measurement, see docs/opendp_peers.md),
every public atom of such a column gets a key of its own, and every categorical column and integer column
with few public values keeps one key per value (:class:`~privsyn_core.data.levelled_codec.LevelledCodec`);
all are handed to OpenDP as integer keys ``0..L-1`` (``Context.contingency_table(keys=...)``: the keys are
public, so no key is learnt from the data).  A synthetic bin decodes to a uniform value inside the bin, an
atom or a level to itself: post-processing.

Guarantee.  MST (McKenna, Miklau, Sheldon, "Winning the NIST Contest: A scalable and general approach
to differentially private synthetic data", J. Privacy and Confidentiality 2021, Alg. 1) and AIM
(McKenna, Mullins, Sheldon, Miklau, "AIM: an adaptive and iterative mechanism for differentially
private synthetic data", PVLDB 2022, Alg. 1) are stated under rho-zCDP with Gaussian noise.  OpenDP
(0.16, ``opendp.extras.mbi``) runs them under the output measure it is given; with
``loss_of(epsilon=...)`` that is ``max_divergence``, i.e. **pure epsilon-DP**: ``get_associated_metric``
maps it to the L1 metric, the marginals get OpenDP's Laplace noise on integer counts (``then_noise``;
``make_laplace``: "internally, all sampling is done using the discrete Laplace distribution", after
Canonne, Kamath, Steinke 2020) and the selections use ``make_noisy_max`` (McKenna, Sheldon,
"Permute-and-flip", NeurIPS 2020).  So no zCDP-to-DP conversion is involved: the peers here are
epsilon-DP, the same guarantee as ours.  Neighbouring relation as OpenDP defines it: add/remove one
row is ``unit_of(contributions=1)`` (symmetric distance 1), replace-one is ``unit_of(changes=1)``.
OpenDP's compositor refuses any measurement whose privacy map exceeds epsilon, so the whole release is
epsilon-DP; the ledger records OpenDP's own split of epsilon (one-way marginals 1/2, then MST's
selection 1/10 and measurement 9/10 of the rest, or AIM's adaptive rounds), summing exactly to epsilon.

Where OpenDP 0.16 refuses its own arithmetic.  MST splits its selection budget ``x`` into ``k = d - 1``
rounds of ``prior(x / k)`` (one float below ``x / k``); its compositor adds the ``k`` rounds rounding
upwards, and for many ``k >= 7`` that sum exceeds ``x`` by an ulp, so OpenDP refuses its own run ("insufficient
budget for query", opendp/opendp#2789; every ``k`` divisible by 8 at every budget).  :func:`mst_plan` replays
that arithmetic (a function of epsilon and ``d`` alone, no data) and hands OpenDP the first configuration it
accepts: its defaults where they pass, else ``measure_split`` lowered from 0.9 by at most 1e-3, else one
selection fewer (a spanning forest one edge short of MST's tree); the release's warnings say which.  AIM's
last round may leave a rounding residue of the budget (about 1e-17) that OpenDP 0.16 then tries to spend
and fails on ("scale (-0.5) must not be finite and non-negative"); see
:mod:`privsyn_core.mechanisms.peers._opendp_aim`.

Interrupts.  OpenDP runs its Python steps as callbacks from Rust: an exception that is not an ``Exception``
(``KeyboardInterrupt``, ``SystemExit``) raised inside one aborts the process ("free(): invalid pointer"),
and one that is (a timeout) comes back wrapped in an ``OpenDPException``.  During a run the Python handlers
of SIGINT, SIGTERM and SIGALRM therefore raise a plain :class:`OpenDPInterrupted` instead, which OpenDP
unwinds cleanly, and the handler's own exception is raised again once OpenDP has returned
(:func:`signals_outside_opendp`): an interrupt propagates as itself, never as a budget message.

Null cells.  OpenDP adds a null key to every column of a contingency table (its ``_with_null``), so
after noise a synthetic row can hold a null.  A null means "somewhere in the domain": it is filled
with a uniform public key of its column (a category, a value, an atom or an equal bin), and the number of
filled cells is reported in the release's warnings.  Both are functions of the released rows only.

Randomness.  OpenDP draws its noise from its own cryptographically secure generator, which cannot be
seeded; ``mbi`` samples the rows with numpy's global generator.  A caller's seed therefore replays
only our post-processing (in-bin positions, null filling), never the noise or the rows.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import re
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from types import FrameType
from typing import Any

import numpy as np

from privsyn_core.data.unit_codec import atom_layout
from privsyn_core.errors import ParameterError, PrivsynError
from privsyn_core.privacy.accounting import Ledger, split_epsilon

#: Registry keys of the peers, in display order.
PEERS = ("opendp_mst", "opendp_aim")
#: What the app and the CLI say where OpenDP is missing.
INSTALL_NOTE = ("OpenDP's MST and AIM (the field's standard, pure epsilon-DP) are optional: install them with "
                "`pip install -r requirements-peers.txt` (opendp[mbi]: about 800 MB with jax and polars) and "
                "restart; they then appear beside our mechanisms.")
#: The modules a peer run imports.
REQUIRED_MODULES = ("opendp", "mbi", "polars")
#: Default equal bins per continuous column, measured under W1 and the robust TVDs (docs/opendp_peers.md).
DEFAULT_BINS = 32
#: OpenDP's shares of epsilon (``opendp.extras.mbi``, 0.16): one-way marginals of every column first.
ONEWAY_SHARE = 0.5
#: MST's share of the rest spent on measuring the selected 2-way marginals (``MST.measure_split``).
MST_MEASURE_SPLIT = 0.9
#: Lowest ``measure_split`` :func:`mst_plan` tries (steps of 1e-6 below 0.9) before dropping a selection.
MST_SPLIT_STEP, MST_SPLIT_STEPS = 1e-6, 1000
#: The sentence every peer release carries about its randomness.
SEED_NOTE = ("OpenDP draws its noise from its own secure generator, which cannot be seeded: a seed replays only "
             "the post-processing (positions inside bins, null filling), not the noise")


def opendp_available() -> bool:
    """Whether OpenDP with its ``mbi`` extra can be imported (checked without importing it); ``False`` also when an
    import finder refuses one of the names (an environment that blocks the package)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in REQUIRED_MODULES)
    except ImportError:
        return False


def key_sizes(levels: tuple[int, ...], bins: int, atoms: tuple[int, ...] | None = None) -> list[int]:
    """Number of public keys of every column: its levels, else its public atoms and ``bins`` equal bins."""
    atoms = atoms or (0,) * len(levels)
    return [k if k else m + bins for k, m in zip(levels, atoms, strict=True)]


def to_codes(unit: np.ndarray, levels: tuple[int, ...], bins: int, atoms: tuple[int, ...] | None = None) -> np.ndarray:
    r"""Integer key of every cell, from its unit coordinate ``u`` and the column's public layout.

    A column with ``k`` levels (categories, few-valued integers; ``u = (i + 1/2)/k``) has key ``i``.  A numeric
    column without atoms has key ``min(floor(u B), B - 1)``: the equal bin of its public interval
    (``u = (x - lo)/(hi - lo)`` clipped into ``[0, 1]``).  A numeric column with ``m`` public atoms
    (:func:`privsyn_core.data.domain.atom_layout`: atom ``i`` in the slot ``[i s, (i+1) s)`` of ``[0, 1/2)``, the
    continuous part on ``[1/2, 1]``) has key ``i`` for atom ``i`` and ``m + b`` for the ``b``-th of ``B`` equal
    bins of its continuous part, as a careful user would key a zero-inflated amount.
    """
    unit = np.asarray(unit, dtype=float)
    atoms = atoms or (0,) * len(levels)
    codes = np.empty(unit.shape, dtype=np.int64)
    for j, (k, m) in enumerate(zip(levels, atoms, strict=True)):
        u = unit[:, j]
        if k or not m:
            size = k or bins
            codes[:, j] = np.minimum((u * size).astype(np.int64), size - 1)
            continue
        slot, start = atom_layout(m)
        atom = np.minimum((u / slot).astype(np.int64), m - 1)
        part = m + np.minimum(((u - start) * 2 * bins).astype(np.int64), bins - 1)
        codes[:, j] = np.where(u < start, atom, part)
    return codes


def from_codes(codes: np.ndarray, levels: tuple[int, ...], bins: int, rng: np.random.Generator,
               atoms: tuple[int, ...] | None = None) -> np.ndarray:
    """Unit coordinates of released keys (:func:`to_codes` inverted): the centre of a level's cell or of an atom's
    slot, a uniform point inside a numeric bin."""
    codes = np.asarray(codes)
    atoms = atoms or (0,) * len(levels)
    out = np.empty(codes.shape, dtype=float)
    for j, (k, m) in enumerate(zip(levels, atoms, strict=True)):
        if k:
            out[:, j] = (codes[:, j] + 0.5) / k
            continue
        inside = (codes[:, j] - m + rng.random(len(codes))) / bins
        if not m:
            out[:, j] = inside
            continue
        slot, start = atom_layout(m)
        ends = np.r_[np.arange(1, m) * slot, start]
        centres = (np.r_[0.0, ends[:-1]] + ends) / 2
        out[:, j] = np.where(codes[:, j] < m, centres[np.minimum(codes[:, j], m - 1)], start + inside * (1 - start))
    return out


def fill_nulls(codes: np.ndarray, sizes: list[int], rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Replace null keys (NaN) by a uniform public key of their column; returns the keys and how many.

    A uniform key of a numeric column without atoms then decodes to a uniform value on ``[lo, hi]``.  Applied to
    the released rows only: post-processing.
    """
    codes = np.array(codes, dtype=float)
    holes = np.isnan(codes)
    draws = np.floor(rng.random(codes.shape) * np.asarray(sizes, dtype=float))
    codes[holes] = draws[holes]
    return codes.astype(np.int64), int(holes.sum())


def null_warning(count: int, cells: int) -> str:
    """The release's sentence about the null cells that were filled (a count of released cells)."""
    return (f"{count} of {cells} synthetic cells were null (OpenDP's 'missing' key of every column) and were "
            "filled with a uniform public key of their column (a category, a value, an atom or an equal bin)")


@dataclass(frozen=True)
class MstPlan:
    """What MST is handed: its number of selection rounds and the share of its budget spent on measuring.

    OpenDP's defaults are ``selections = d - 1`` (a spanning tree) and ``measure_split = 0.9``.
    """

    selections: int
    measure_split: float = MST_MEASURE_SPLIT


def _prior(x: float) -> float:
    """The float below ``x`` (OpenDP's ``prior``)."""
    return math.nextafter(x, -math.inf)


def _rounded_up_sum(part: float, count: int) -> float:
    """``count`` copies of ``part`` added one by one, each sum rounded upwards: OpenDP's composition of pure-DP
    losses (checked against ``make_adaptive_composition(...).map`` in tests/test_peers.py)."""
    total = 0.0
    for _ in range(count):
        exact = Fraction(total) + Fraction(part)
        total = float(exact)
        if Fraction(total) < exact:
            total = math.nextafter(total, math.inf)
    return total


def mst_accepts(epsilon: float, plan: MstPlan) -> bool:
    """Whether OpenDP 0.16 accepts its own split of MST's selection budget under ``plan`` (no data involved).

    Replays ``make_contingency_table`` (two-way budget ``prior(prior(eps - eps/2))``) and ``MST.make_marginals``
    (selection budget ``x = prior(prior(b - b m))`` for measure split ``m``), then ``_make_mst_select``: ``k``
    rounds of ``prior(x / k)``, which its compositor refuses when their rounded-up sum exceeds ``x``.
    """
    twoway = _prior(_prior(epsilon - epsilon * ONEWAY_SHARE))
    selection = _prior(_prior(twoway - twoway * plan.measure_split))
    return _rounded_up_sum(_prior(selection / plan.selections), plan.selections) <= selection


@functools.lru_cache(maxsize=256)
def mst_plan(epsilon: float, d: int) -> MstPlan:
    """The first MST configuration OpenDP 0.16 accepts for ``d`` columns at ``epsilon`` (public inputs only).

    Tried in order: OpenDP's defaults (``d - 1`` selections, ``measure_split`` 0.9); the same selections with
    ``measure_split`` lowered in steps of :data:`MST_SPLIT_STEP` (at most :data:`MST_SPLIT_STEPS` of them: the
    selection share 0.1 grows by at most 1%); then one selection fewer, and so on (one selection always passes).
    """
    for selections in range(d - 1, 0, -1):
        for step in range(MST_SPLIT_STEPS):
            plan = MstPlan(selections, MST_MEASURE_SPLIT - step * MST_SPLIT_STEP)
            if mst_accepts(epsilon, plan):
                return plan
    raise AssertionError("one selection round always composes within its budget")  # pragma: no cover


def mst_deviation(plan: MstPlan, d: int) -> list[str]:
    """The release's warning where ``plan`` differs from OpenDP's defaults (a function of epsilon and ``d``)."""
    changes = []
    if plan.measure_split != MST_MEASURE_SPLIT:
        changes.append(f"hands it measure_split {plan.measure_split:.6f} instead of {MST_MEASURE_SPLIT}")
    if plan.selections != d - 1:
        changes.append(f"measures {plan.selections} two-way marginals instead of {d - 1} (a spanning forest "
                       f"{d - 1 - plan.selections} edge(s) short of MST's tree)")
    if not changes:
        return []
    return [f"OpenDP 0.16 refuses its own budget split of MST's {d - 1} selection rounds on {d} columns (a rounding "
            f"error, opendp/opendp#2789), so this run {' and '.join(changes)}"]


def ledger(algorithm: str, epsilon: float, plan: MstPlan | None = None) -> Ledger:
    """OpenDP's split of ``epsilon`` for ``algorithm`` (``"mst"`` or ``"aim"``), summing exactly to it.

    OpenDP 0.16 (``make_contingency_table``) spends half of epsilon on the one-way marginals of every
    column; MST then spends ``1 - measure_split`` of the rest on choosing the edges of a spanning tree by
    report-noisy-max (``plan.selections`` rounds) and ``measure_split`` on measuring those 2-way marginals;
    AIM spends the rest in adaptive rounds (select a marginal by noisy max, measure it) under a privacy filter.
    OpenDP spends at most each share (it steps every share down by a few ulps), and its compositor enforces
    the total.
    """
    oneway = ("one-way marginals of every column, Laplace noise on integer counts (OpenDP)", ONEWAY_SHARE)
    if algorithm == "mst":
        if plan is None:
            raise ValueError("MST's ledger needs its plan (mst_plan)")
        rest = 1 - ONEWAY_SHARE
        return split_epsilon(epsilon, [
            oneway,
            (f"MST edge selection, {plan.selections} rounds of report-noisy-max (OpenDP)",
             rest * (1 - plan.measure_split)),
            ("selected 2-way marginals, Laplace noise on integer counts (OpenDP)", rest * plan.measure_split)])
    return split_epsilon(epsilon, [
        oneway, ("AIM rounds: select a marginal by noisy max, measure it with Laplace noise (OpenDP)",
                 1 - ONEWAY_SHARE)])


class OpenDPInterrupted(Exception):
    """Raised by a signal handler while OpenDP runs; an ``Exception``, so OpenDP's callbacks unwind it cleanly."""


SignalHandler = Callable[[int, FrameType | None], Any]


def _deferring(handler: SignalHandler, caught: list[BaseException]) -> SignalHandler:
    """``handler`` with whatever it raises kept in ``caught`` and replaced by :class:`OpenDPInterrupted`."""
    def run(signum: int, frame: FrameType | None) -> Any:
        try:
            return handler(signum, frame)
        except BaseException as exc:
            caught.append(exc)
            raise OpenDPInterrupted(signal.Signals(signum).name) from None
    return run


@contextlib.contextmanager
def signals_outside_opendp() -> Iterator[list[BaseException]]:
    """While OpenDP runs, signal handlers raise :class:`OpenDPInterrupted`; yields what they meant to raise.

    Applies to the Python handlers of SIGINT, SIGTERM and SIGALRM (main thread only: no other thread runs a
    handler); they are restored on exit.  The caller raises the first kept exception once OpenDP has returned.
    """
    caught: list[BaseException] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    names = ("SIGINT", "SIGTERM", "SIGALRM")
    previous = {sig: handler for sig in (getattr(signal, n) for n in names if hasattr(signal, n))
                if callable(handler := signal.getsignal(sig))}
    for sig, handler in previous.items():
        signal.signal(sig, _deferring(handler, caught))
    try:
        yield caught
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


#: OpenDP's error variants that state a refusal (Rust ``ErrorVariant``): about budgets, scales and distances.
OPENDP_REFUSALS = ("FailedFunction", "FailedMap", "FailedRelation", "MakeMeasurement", "MakeTransformation",
                   "MakeDomain", "InvalidDistance", "Overflow")


def opendp_reason(exc: BaseException) -> str:
    """OpenDP's own reason for a refusal: the innermost ``Variant("message")`` of its error, at most 200 characters.

    OpenDP wraps an error raised inside one of its steps in the traceback text of each enclosing step; the
    innermost refusal (:data:`OPENDP_REFUSALS`) is the reason (e.g. ``FailedFunction("insufficient budget for
    query: ...")``).  Its text is about budgets and noise scales, functions of epsilon, the public keys and
    OpenDP's noisy intermediate results; the Python tracebacks around it are dropped, and an error without a
    refusal is named by its variant or type only.
    """
    variants = "|".join(OPENDP_REFUSALS)
    found = re.findall(rf'\b({variants})\("([^"\n]{{0,200}})"\)', str(getattr(exc, "message", None) or ""))
    if found:
        return f"{found[-1][0]}: {found[-1][1]}"
    return str(getattr(exc, "variant", None) or type(exc).__name__)


def release_with_opendp(codes: np.ndarray, sizes: list[int], epsilon: float, algorithm: str, neighbouring: str,
                        rows: int | None, plan: MstPlan | None = None) -> np.ndarray:
    """Run OpenDP's ``algorithm`` on the integer keys and sample synthetic keys (NaN where null).

    ``rows`` ``None`` samples as many rows as the fitted model's total, a function of the noisy marginals
    (under add/remove the exact count is private); ``plan``: MST's configuration (:func:`mst_plan`), None for
    AIM.  An
    interrupt (SIGINT, SIGTERM, SIGALRM) propagates as what its handler raised; only OpenDP's own refusal
    becomes a :class:`~privsyn_core.errors.PrivsynError`, with OpenDP's reason.
    """
    import opendp.prelude as dp

    with signals_outside_opendp() as caught:
        try:
            released = _run_opendp(dp, codes, sizes, epsilon, algorithm, neighbouring, rows, plan)
        except Exception as exc:
            if not caught:
                if isinstance(exc, dp.OpenDPException):
                    raise PrivsynError(f"OpenDP's {algorithm.upper()} refused to run under pure epsilon-DP at "
                                       f"epsilon {epsilon:g} ({opendp_reason(exc)})") from None
                raise
    if caught:
        raise caught[0]
    return released


def _run_opendp(dp: Any, codes: np.ndarray, sizes: list[int], epsilon: float, algorithm: str, neighbouring: str,
                rows: int | None, plan: MstPlan | None) -> np.ndarray:
    """OpenDP's contingency table of the keys under ``algorithm``, and rows sampled from its model."""
    import polars as pl

    from privsyn_core.mechanisms.peers._opendp_aim import finishing_aim

    dp.enable_features("contrib")
    names = [f"c{j}" for j in range(codes.shape[1])]
    frame = pl.DataFrame({name: codes[:, j] for j, name in enumerate(names)}).lazy()
    unit = dp.unit_of(contributions=1) if neighbouring == "add_remove" else dp.unit_of(changes=1)
    context = dp.Context.compositor(data=frame, privacy_unit=unit, privacy_loss=dp.loss_of(epsilon=epsilon),
                                    split_evenly_over=1)
    keys = {name: list(range(size)) for name, size in zip(names, sizes, strict=True)}
    model = (finishing_aim() if plan is None else
             dp.mbi.MST(num_selections=plan.selections, measure_split=plan.measure_split))
    table = context.query().select(names).contingency_table(keys=keys, algorithm=model).release()
    if rows is None:
        rows = max(1, round(float(table.model.total)))
    released = table.synthesize(rows, method="sample")
    return np.column_stack([released[name].cast(pl.Float64).to_numpy() for name in names])


def check_columns(unit: np.ndarray, minimum: int, maximum: int | None, name: str) -> None:
    """Refuse a table of the wrong width before OpenDP sees it (the width is public)."""
    check_width(unit.shape[1], minimum, maximum, name)


def check_width(d: int, minimum: int, maximum: int | None, name: str) -> None:
    """Refuse ``d`` encoded columns outside ``[minimum, maximum]`` (a :class:`ParameterError` naming the range)."""
    if d < minimum or (maximum is not None and d > maximum):
        allowed = f"at least {minimum}" if maximum is None else f"{minimum} to {maximum}"
        raise ParameterError(f"{name} needs {allowed} columns, got {d}")


__all__ = [
    "DEFAULT_BINS",
    "INSTALL_NOTE",
    "PEERS",
    "MstPlan",
    "OpenDPInterrupted",
    "fill_nulls",
    "from_codes",
    "ledger",
    "mst_accepts",
    "mst_deviation",
    "mst_plan",
    "opendp_available",
    "opendp_reason",
    "release_with_opendp",
    "signals_outside_opendp",
    "to_codes",
]
