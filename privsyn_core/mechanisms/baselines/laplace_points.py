r"""Baseline: Laplace noise on every record's coordinates.

Each record ``x_i \in [0,1]^d`` is released as ``clip(x_i + noise)``.  Under replace-one
neighbouring a single record changes, moving the concatenated vector of all coordinates
by at most ``d`` in :math:`\ell_1`, so noise of scale ``d/epsilon`` per coordinate gives
epsilon-DP (the Laplace mechanism).  Add/remove is not supported: the output size is n.

Floating-point safety: the coordinates are first snapped to a public grid of
``resolution`` steps per axis and the noise is *integer* discrete Laplace in grid units
(scale ``d * resolution / epsilon``), so no continuous-noise floating-point attack
(Mironov 2012) applies.  The W1 error is about ``d/epsilon`` per record: this is the
naive competitor every mechanism should beat.  Coupling each record with its own released copy (clipping to the
box only brings it closer), ``E W1 <= E max_k |noise_k| + 1/resolution``: the largest of ``d`` discrete Laplace
variables of scale ``d/epsilon``, ``O(d log(d) / epsilon)``, whatever ``n``.

When the noise scale ``b = d/epsilon`` (unit coordinates, a public quantity) is at least :data:`UNIFORM_SCALE`, the
mean distance between two independent uniform points on an axis, the clipped noisy points are about as far from the
data as points drawn uniformly on the box: the release says so in its warnings.
"""

from __future__ import annotations

import numpy as np

from privsyn_core.mechanisms.base.audit import AuditCase, record_features
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.result import MechanismOutput

#: Noise scale (unit coordinates) from which the release is no better than uniform points on the box.
UNIFORM_SCALE = 1 / 3


def points_ledger(epsilon: float) -> Ledger:
    """The ledger of every run (its privacy map's value): one stage, every record's noise at the whole epsilon."""
    return [("per-record Laplace (sensitivity d)", epsilon)]


@register(
    "laplace_points",
    privacy_map=lambda epsilon, neighbouring, params, n, d: points_ledger(epsilon),
    title="Laplace noise on each record (baseline)",
    paper="baseline",
    data_kind="continuous",
    neighbouring=("replace",),
    is_private=True,
    params={"resolution": ParamSpec(1024, int, (1, 2**20), help="public grid steps per axis before integer noise")},
    guarantee="epsilon-DP under replace-one: discrete Laplace of scale d/epsilon on every coordinate",
    description="The naive approach: perturb every record independently. Its error does not shrink with n.",
    citation=('a textbook baseline: the Laplace mechanism on every record (Dwork, McSherry, Nissim, Smith, TCC '
              '2006)'),
    order=90,
    w1_claim=W1Claim("derived", "derived in the module docstring: coupling each record with its noisy copy, "
                                "E W1 = O(d log(d) / eps), not shrinking with n"),
    rate=lambda epsilon, n, d: 1 / epsilon,
    audit=AuditCase(n=4, params={"resolution": 64}, features=record_features),
    released=("noise_scale_unit",),
)
def laplace_points(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                   rng: np.random.Generator, resolution: int, size: int | str | None = None) -> MechanismOutput:
    n, d = unit.shape
    grid = np.rint(unit * resolution).astype(np.int64)
    noisy = grid + discrete_laplace(d * resolution / epsilon, size=grid.shape, rng=rng)
    points = np.clip(noisy / resolution, 0.0, 1.0)
    rows = points if n_synthetic is None else points[rng.integers(0, n, n_synthetic)]
    scale = d / epsilon
    warnings = [] if scale < UNIFORM_SCALE else [
        f"laplace_points: the noise scale d/epsilon = {scale:.3g} is at least {UNIFORM_SCALE:.2g} of each axis, so "
        "the released points are about as far from the data as points drawn uniformly on the box; raise epsilon "
        "or use a mechanism that releases counts (pmm, marginal_tree)"]
    return MechanismOutput(unit=points, rows=rows, ledger=points_ledger(epsilon),
                           params={"noise_scale_unit": scale}, warnings=warnings)
