"""A growing table as a first-class object: one epsilon for every synthetic release of a stream of batches.

>>> import privsyn_core as ps, pandas as pd, numpy as np, tempfile, os
>>> folder = tempfile.mkdtemp()
>>> stream = open_stream(os.path.join(folder, "s.json"), ps.unit_schema(1), 1.0, create=True, depth=3, rng=0)
>>> release = stream.add(pd.DataFrame({"x0": np.linspace(0, 1, 50)}))
>>> release.params["step"], release.mechanism, sum(e for _, e in release.ledger)
(1, 'online_pmm', 1.0)

The mechanism is online PMM (:mod:`privsyn_core.mechanisms.online.online_pmm`, He, Vershynin and Zhu,
"Online Differentially Private Synthetic Data Generation", arXiv:2402.08012): ``epsilon`` covers every release
of the whole, unbounded stream under event-level add/remove (one record more or less in one batch).  Its tree
has a fixed depth (``depth`` or ``horizon_n``) or grows with the stream (``growing=True``: a level opens when the
released total passes PMM's depth rule for it).

The state lives in one JSON file, written atomically (a temporary file in the same folder, ``fsync``,
:func:`os.replace`, ``fsync`` of the folder) under an exclusive lock, so a release next month continues after a
restart, and a crash leaves the old state or the new one.  It records the schema, epsilon, depth, the ledger, the
step, the open levels (when each opened, their released estimates), the counters' private partial sums and the
secret key of the noise: **the
state file is as secret as the raw data** (it is created with mode 0600); only :class:`~privsyn_core.result.Release`
objects are publishable.

Replays and forks.  The noise of every counter node is a pure function of the secret key and the node
(:func:`privsyn_core.mechanisms.online.continual.keyed_rng`), and the synthetic rows of step ``t`` are drawn from a
generator keyed by ``t``: :meth:`Stream.release` returns the current step's release again, identical, and
re-running a step on a restored copy of the state with the same batch reproduces it instead of drawing fresh noise
on the same counts.  A stream created with a ``ledger`` is bound to it: every step is recorded there with its
batch's identity (a keyed hash of the batch's leaf counts, which determine the step's release) before the state
is saved, and marked published once the release has left (:meth:`Stream.add`'s ``publish``).  So

* a *different* batch at a step already recorded (a copied or restored state, a fork) is refused: two releases
  of one step on neighbouring batches would differ by one record with the same noise;
* the same batch again after a crash re-emits that step's release, identical, and spends nothing: whether the
  crash came before the state was saved (the step is recomputed from the same noise) or after it, before the
  release was published (the step's record is still unpublished: the saved step is released again, not added a
  second time).

A stream created without a ledger (the library's ``ledger=None``) records nothing: copies of its state are
outside the guarantee (docs/online_pmm.md).

Release mode.  A stream created with ``release_mode=True`` never refuses a batch on its content: every record
goes through the batch path's public rule (:class:`~privsyn_core.data.conform.DomainPolicy`: numbers clipped into
their bounds, a missing, non-numeric or unlisted value replaced by the column's declared fallback), a per-record
map, 1-stable (McSherry, "Privacy Integrated Queries", SIGMOD 2009, Thm. 1), so each step keeps its epsilon
under event-level add/remove.  The rule is chosen at creation, stored in the state and stated in every step's
release (``Release.domain_policy``).  Without it (teaching), a value outside the schema is refused.

Bad input -- in teaching mode a batch outside the schema; a batch without the schema's columns; a missing or
corrupted state, a state of another schema or epsilon -- raises a :class:`~privsyn_core.errors.PrivsynError` with
one line, and the state file is left unchanged; the state is read only from a regular file, at most
:data:`MAX_STATE_BYTES`, and its counters are checked against its step.  A state of format version 1 (fixed
depth, one counter) is read with one group of levels and continues with the same noise; versions 1 and 2 are
unbound (no ledger binding); versions 1 to 3 refuse values outside the schema.  Each is written back as version 4.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import itertools
import json
import math
import os
import secrets
import stat
import tempfile
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.conform import DomainPolicy, conform
from privsyn_core.data.domain import Schema, as_frame
from privsyn_core.engine.pipeline import PublicSize, Publisher, assemble
from privsyn_core.engine.release import ledger_of, reserve_release
from privsyn_core.errors import DataError, OutputError, ParameterError, PrivsynError, SchemaError, StreamError
from privsyn_core.mechanisms.online import online_pmm
from privsyn_core.mechanisms.online.continual import CounterState, keyed_rng
from privsyn_core.mechanisms.online.online_pmm import LevelGroup, StreamCounters, StreamPlan, growing_plan, plan_stream
from privsyn_core.privacy.accounting import check_epsilon
from privsyn_core.privacy.budget import RECORDED, PrivacyLedger
from privsyn_core.privacy.noise import RandomLike, resolve_rng
from privsyn_core.result import MechanismOutput, Release
from privsyn_core.validation import MAX_SYNTHETIC_ROWS, check_count

FORMAT = "privsyn-stream"
VERSION = 4
#: Versions this library reads (1: fixed depth, one counter; 2: groups of levels; 3: the ledger binding; 4: release
#: mode's domain policy).
READABLE = (1, 2, 3, 4)
MECHANISM = "online_pmm"
#: The relation of every stream release (event level: ``online_pmm.RELATION`` says it in words).
NEIGHBOURING = "add_remove"
#: What a stream release says of its mechanism (:func:`~privsyn_core.engine.pipeline.assemble`): private, exact
#: integer noise (the counters' discrete Laplace draws).
STREAM_PUBLISHER = Publisher(MECHANISM, is_private=True)
#: The largest state file read (bytes): far above a depth-20 stream after a million steps, and a bound on what a
#: path to a device or a damaged file can make this library read.
MAX_STATE_BYTES = 2**32


def open_stream(path: str | Path, schema: Schema | dict | None = None, epsilon: float | None = None, *,
                create: bool = False, depth: int | None = None, horizon_n: int | None = None,
                horizon_steps: int | None = None, growing: bool = False, rng: RandomLike = None,
                ledger: PrivacyLedger | str | os.PathLike[str] | None = None, dataset: str | None = None,
                release_mode: bool = False, fallbacks: dict[str, Any] | None = None) -> Stream:
    """Open the stream whose state is ``path``, or create it (``create=True``).

    Parameters
    ----------
    path : str or Path
        The state file (JSON).  Creating refuses an existing file; opening refuses a missing one.
    schema : Schema or dict
        Public domain of the columns (required to create; when opening, checked against the state's).
    epsilon : float
        Budget of the *whole* stream, every step included (required to create; checked when opening).
    create : bool
        Create a new stream at ``path``.
    depth : int, optional
        Tree depth ``r`` (public).  Else ``horizon_n`` gives PMM's depth for that many records.
    horizon_n : int, optional
        A public planned record count that the depth is tuned for (not read off the data): PMM's offline depth
        for it ([HVZ23] Cor. 4.4).
    horizon_steps : int, optional
        With ``horizon_n``: the planned number of steps; the depth is then PMM's for that size at the counters'
        noise after that many steps (:func:`~privsyn_core.mechanisms.online.online_pmm.horizon_depth`).
    growing : bool
        A depth that grows with the stream, no plan needed: level ``j`` opens at the first step whose released
        total passes PMM's depth rule at the level's budget
        (:meth:`~privsyn_core.mechanisms.online.online_pmm.StreamPlan.opening_depth`), up to
        ``MAX_STREAM_DEPTH``; every level's budget is committed now.
    rng : None, "secure" or int
        ``None``/``"secure"``: the noise key comes from the operating system (a real stream).  An int seed
        derives the key from the seed: tests and teaching only (every release then says it replays).
    ledger : PrivacyLedger or path, optional
        Creating only: the privacy ledger that counts the whole stream's epsilon, reserved once (checked against
        the dataset's budget) before the state file is written; the steps then spend nothing new.  The stream is
        bound to it: each step is recorded there with its batch (see the module docstring).
    dataset : str, optional
        The dataset's name in the ledger (default ``stream:<the state file's absolute path>``); name it as the
        table's offline releases are named to keep both under one budget.
    release_mode : bool
        Creating only: never refuse a batch on its content (module docstring): values outside the schema are
        clipped or replaced by their column's fallback, as :func:`privsyn_core.synthesize` does in release mode.
    fallbacks : dict, optional
        With ``release_mode``: the value a missing or out-of-domain value of a column becomes (public; default
        :func:`~privsyn_core.data.conform.default_fallback`).
    """
    path = Path(path)
    if create:
        reservation, binding = None, None
        if ledger is not None and epsilon is not None:  # (a missing epsilon is named by _create)
            store = ledger_of(ledger)
            name, stream_id = dataset or f"stream:{path.resolve()}", uuid.uuid4().hex
            reservation = reserve_release(store, name, check_epsilon(epsilon), relation=NEIGHBOURING,
                                          mechanism=MECHANISM, label=f"stream {path.name} (every step)",
                                          stream=stream_id)
            binding = {"ledger": str(store.path.absolute()), "dataset": name, "stream": stream_id}
        try:
            stream = _create(path, schema, epsilon, depth, horizon_n, horizon_steps, growing, rng, binding,
                             _policy(schema, release_mode, fallbacks))
        except BaseException:
            if reservation is not None:
                reservation.cancel()  # no state, no noise: nothing was released
            raise
        if reservation is not None:
            reservation.confirm()
        return stream
    if ledger is not None or dataset is not None:
        raise ParameterError("ledger and dataset go with create=True: the whole stream's epsilon is counted once, "
                             "when it is created")
    if depth is not None or horizon_n is not None or horizon_steps is not None or growing or rng is not None or \
            release_mode or fallbacks is not None:
        raise ParameterError("depth, horizon_n, growing, rng, release_mode and fallbacks are fixed when a stream is "
                             "created; open it without them")
    stream = Stream(path)
    state = _load(path)
    if schema is not None:
        wanted = _as_schema(schema).to_dict()
        if wanted != state["schema"]:
            raise StreamError(f"the stream {path} was created with another schema; open it with its own schema "
                              "(or none)")
    if epsilon is not None and check_epsilon(epsilon) != state["epsilon"]:
        raise StreamError(f"the stream {path} was created with epsilon={state['epsilon']!r}, not {epsilon!r}; its "
                          "budget cannot change")
    stream._refresh(state)
    return stream


class Stream:
    """A stream of batches with its state file; see the module docstring.  Make one with :func:`open_stream`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.schema: Schema = Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}]})
        self.epsilon = 0.0
        self.plan: StreamPlan = plan_stream(0, 1, 1.0)
        self.step = 0
        self.depth = 0
        self.opened: list[int] = [1]
        self.seed: int | None = None
        self.params: dict[str, Any] = {}
        self.policy: DomainPolicy | None = None

    def _refresh(self, state: dict[str, Any]) -> None:
        self.schema = Schema.from_dict(state["schema"])
        self.epsilon = state["epsilon"]
        self.plan = _plan(state)
        self.step = state["step"]
        self.depth = state["groups"][-1]["last"]
        self.opened = [g["opened"] for g in state["groups"] for _ in range(g["first"], g["last"] + 1)]
        self.seed = state["seed"]
        self.params = dict(state["params"])
        self.policy = _stored_policy(self.schema, state["domain_policy"])

    @property
    def ledger(self) -> list[tuple[str, float]]:
        """The whole stream's ledger (every step): ``math.fsum`` of it is :attr:`epsilon`."""
        return list(self.plan.ledger)

    def counters(self) -> np.ndarray:
        """The released noisy estimates of every cell of every open level at the current step (heap layout)."""
        return _counters(_load(self.path)).released()

    def add(self, batch: Any, *, n_synthetic: int | None = None,
            publish: Callable[[Release], None] | None = None) -> Release:
        """Add one batch (the records of one step) and return the new step's release.

        ``batch`` is a DataFrame with the schema's columns, an iterable of such DataFrames (blocks of one batch,
        e.g. :func:`~privsyn_core.data.io.iter_csv`), or a Dask DataFrame (counted partition by partition where
        it lies).  Values outside the public bounds or categories are refused (nothing is clipped), except in a
        stream created in release mode, which maps them into the domain (module docstring).  An empty batch is a
        step without records.

        ``publish(release)``, when given, is called once the step is recorded and the state saved (the command
        line writes the output files there); the step is marked published in the ledger only after it returns,
        so a crash before then lets the same batch re-emit the same release.  For a stream bound to a ledger, a
        batch other than the one recorded at its step is refused (:class:`StreamError`; module docstring).
        """
        n_synthetic = check_count("n_synthetic", n_synthetic, MAX_SYNTHETIC_ROWS)
        with _locked(self.path), contextlib.ExitStack() as scope:
            state = _load(self.path)
            self._refresh(state)
            leaves = self._leaves(batch)
            bound = _Binding.of(state, leaves, scope)
            if bound is not None and bound.unpublished_rerun(state["step"]):
                release = self._release(_counters(state), n_synthetic, state)  # the saved step, not a new one
            else:
                counters = _counters(state)
                online_pmm.step(counters, leaves, self.plan, keyed_rng(_key(state)))
                state["step"] = counters.step
                state["version"] = VERSION
                state["groups"] = [_pack_group(g) for g in counters.groups]
                release = self._release(counters, n_synthetic, state)  # before the write
                if bound is not None:
                    bound.record(counters.step, self.path)
                _save(self.path, state)
                self._refresh(state)
            if publish is not None:
                publish(release)
            if bound is not None:
                bound.published(state["step"])
        return release

    def release(self, *, n_synthetic: int | None = None) -> Release:
        """The current step's release again: the same counters, the same rows (nothing new is drawn)."""
        n_synthetic = check_count("n_synthetic", n_synthetic, MAX_SYNTHETIC_ROWS)
        state = _load(self.path)
        self._refresh(state)
        if state["step"] == 0:
            raise StreamError(f"the stream {self.path} has no step yet; add a batch first")
        return self._release(_counters(state), n_synthetic, state)

    def report(self) -> dict[str, Any]:
        """Public facts of the stream (no counts): mechanism, epsilon, ledger, step, schema, parameters."""
        return {"mechanism": MECHANISM, "epsilon": self.epsilon, "ledger": [[s, e] for s, e in self.ledger],
                "neighbouring": NEIGHBOURING, "privacy_unit": online_pmm.RELATION, "step": self.step,
                "schema": self.schema.to_dict(),
                "domain_policy": None if self.policy is None else self.policy.to_dict(),
                "params": {**self.params, **self._depth_params(self.depth, self.opened)}, "seed": self.seed}

    def _depth_params(self, depth: int, opened: list[int]) -> dict[str, Any]:
        """A growing stream's current depth and the step each level opened (public: released-value functions)."""
        return {"depth": depth, "opened": list(opened)} if self.plan.growing else {}

    # -- internals -------------------------------------------------------------------------------------
    def _leaves(self, batch: Any) -> np.ndarray:
        """The batch's counts in the ``2^plan.depth`` leaves (the deepest level that may count this step)."""
        from privsyn_core.engine import dask_backend

        depth = self.plan.depth
        if dask_backend.is_dask_frame(batch):
            import dask

            parts = [dask.delayed(_partition_leaves)(part, self.schema, depth, self.policy)
                     for part in batch.to_delayed()]
            leaves = np.zeros(2 ** depth, dtype=np.int64)
            for counts in dask.compute(*parts):
                leaves += counts
            return leaves
        if isinstance(batch, Iterable) and not isinstance(batch, (pd.DataFrame, np.ndarray, list, tuple, dict)):
            leaves = np.zeros(2 ** depth, dtype=np.int64)
            for chunk in batch:  # blocks of rows (a CSV read in chunks): counted and dropped one by one
                leaves += _partition_leaves(chunk, self.schema, depth, self.policy)
            return leaves
        return _partition_leaves(batch, self.schema, depth, self.policy)

    def _release(self, counters: StreamCounters, n_synthetic: int | None, state: dict[str, Any]) -> Release:
        """The step's release, assembled as every batch release is (:func:`~privsyn_core.engine.pipeline.assemble`:
        the ledger summed against the stream's epsilon, the release's warnings); its parameters are public (the
        stream's settings and functions of the released counts)."""
        step, depth = counters.step, counters.depth
        label = f"sample/{step}" + ("" if n_synthetic is None else f"/{n_synthetic}")
        plan = online_pmm.synthetic_plan(counters.released(), self.plan.d, keyed_rng(_key(state))(label),
                                         n_synthetic)
        rows = plan.all_rows()
        warnings = []
        if plan.total == 0:
            warnings.append(f"the noisy total count at step {step} is 0: no synthetic rows were released")
        params = {**state["params"], **self._depth_params(depth, counters.opened), "step": step, "leaves": 2 ** depth,
                  "resolution": online_pmm.level_diameter(depth, self.plan.d),
                  "counter": "hybrid binary tree (Chan, Shi, Song 2011)", "consistency": "proportional",
                  "sample": "uniform", "synthetic_size": int(plan.total), "privacy_unit": online_pmm.RELATION}
        out = MechanismOutput(unit=rows, ledger=list(self.plan.ledger), warnings=warnings)
        result = assemble(STREAM_PUBLISHER, out, data=self.schema.decode(rows), schema=self.schema,
                          epsilon=self.epsilon, neighbouring=NEIGHBOURING, resolved=params,
                          size=PublicSize(None, "unused", [], self.epsilon), n_synthetic=n_synthetic,
                          seed=state["seed"], unit_rows=rows, clipped={}, timings={}, n_records=0,
                          domain_policy=None if self.policy is None else self.policy.to_dict())
        return result.release()


class _Binding:
    """A bound stream's steps in its ledger: ``stream`` (the stream's id), ``batch`` (this batch's identity)."""

    def __init__(self, ledger: PrivacyLedger, stream: str, batch: str) -> None:
        self.ledger, self.stream, self.batch = ledger, stream, batch

    @classmethod
    def of(cls, state: dict[str, Any], leaves: np.ndarray, scope: contextlib.ExitStack) -> _Binding | None:
        """The binding of a state (``None`` for a stream without a ledger) with the batch's identity: BLAKE2b of
        its leaf counts keyed with the stream's secret (the step's release is a function of them; the hash,
        unkeyed, would let anyone holding the ledger test guesses of a small batch).  The ledger's calls share
        one connection until ``scope`` closes."""
        binding = state.get("binding")
        if binding is None:
            return None
        ledger = PrivacyLedger(binding["ledger"])
        scope.enter_context(ledger.shared_connection())
        if ledger.stream_step(binding["stream"], 0) is None:
            raise StreamError(f"the privacy ledger {ledger.path} has no record of this stream (re-initialised, or "
                              "another file?): its steps cannot be checked, so none is added. Restore the ledger")
        digest = hashlib.blake2b(np.ascontiguousarray(leaves, dtype="<i8").tobytes(), key=_key(state),
                                 person=b"privsyn-batch", digest_size=32).hexdigest()
        return cls(ledger, binding["stream"], digest)

    def unpublished_rerun(self, step: int) -> bool:
        """True when the saved ``step`` was recorded on this batch and its release never published: a re-run."""
        return step > 0 and self.ledger.stream_step(self.stream, step) == (self.batch, RECORDED)

    def record(self, step: int, path: Path) -> None:
        """Record ``step`` on this batch; refuse another batch recorded there (the step is already released)."""
        earlier = self.ledger.record_stream_step(self.stream, step, self.batch)
        if earlier is not None and earlier != self.batch:
            raise StreamError(f"step {step} of the stream {path} was already released on another batch (a copied "
                              "or restored state?): refused. Only that step's batch may be added again (it re-emits "
                              "the same release)")

    def published(self, step: int) -> None:
        self.ledger.publish_stream_step(self.stream, step)


def _partition_leaves(batch: Any, schema: Schema, depth: int, policy: DomainPolicy | None) -> np.ndarray:
    """Leaf counts of one batch (or Dask partition): its values mapped into the public domain by release mode's
    ``policy`` (:func:`~privsyn_core.data.conform.conform`, then clipped by the codec), or, without one, refused
    when outside it."""
    frame = as_frame(batch) if not isinstance(batch, pd.DataFrame) else batch
    if len(frame) == 0:
        return np.zeros(2 ** depth, dtype=np.int64)
    if policy is not None:
        return online_pmm.leaf_counts(schema.encode(conform(frame, schema, policy))[0], depth)
    unit, clipped = schema.encode(frame)
    outside = {name: count for name, count in clipped.items() if count}
    if outside:
        name = next(iter(outside))
        lo, hi = schema[name].bounds
        raise DataError(f"the batch has values of column {name!r} outside its public bounds [{lo:g}, {hi:g}]; a "
                        "stream refuses to clip: fix the batch, or create a stream with wider bounds or in release "
                        "mode")
    return online_pmm.leaf_counts(unit, depth)


def _as_schema(schema: Schema | dict | None) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, dict):
        return Schema.from_dict(schema)
    raise SchemaError("a stream needs a public schema (a Schema or its dict); bounds read off the data are not "
                      "private")


def _policy(schema: Schema | dict | None, release_mode: bool, fallbacks: dict[str, Any] | None) -> DomainPolicy | None:
    """Release mode's rule for a new stream (``None``: teaching, values outside the schema refused)."""
    if not isinstance(release_mode, bool):
        raise ParameterError(f"release_mode is True or False, got {release_mode!r}")
    if not release_mode:
        if fallbacks is not None:
            raise ParameterError("fallbacks go with release_mode=True")
        return None
    return DomainPolicy.of(_as_schema(schema), fallbacks)


def _stored_policy(schema: Schema, stored: dict[str, Any] | None) -> DomainPolicy | None:
    """The state's release-mode rule, checked against its schema (a state's field: an error means corruption)."""
    if stored is None:
        return None
    policy = DomainPolicy.of(schema, stored["fallbacks"])
    if policy.to_dict() != stored:
        raise ValueError("the domain policy is not the one its fallbacks give")
    return policy


def _create(path: Path, schema: Schema | dict | None, epsilon: float | None, depth: int | None,
            horizon_n: int | None, horizon_steps: int | None, growing: bool, rng: RandomLike,
            binding: dict[str, str] | None, policy: DomainPolicy | None) -> Stream:
    schema = _as_schema(schema)
    if epsilon is None:
        raise ParameterError("a new stream needs epsilon, the budget of the whole stream")
    epsilon = check_epsilon(epsilon)
    d = len(schema.columns)
    if not isinstance(growing, bool):
        raise ParameterError(f"growing is True or False, got {growing!r}")
    if [depth is not None, horizon_n is not None, growing].count(True) != 1:
        raise ParameterError("a new stream needs one of depth (the tree depth), horizon_n (a public planned record "
                             "count the depth is tuned for) or growing=True (a depth growing with the stream)")
    if growing:
        if horizon_steps is not None:
            raise ParameterError("horizon_steps goes with horizon_n, not with a growing depth")
        plan = growing_plan(d, epsilon)
        r, params = plan.depth, {"depth_rule": "growing", "max_depth": plan.depth,
                                 "level_budget": f"eps_j proportional to (j + {online_pmm.SCHEDULE_OFFSET})^-2"}
    elif depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or \
                not 0 <= int(depth) <= online_pmm.MAX_STREAM_DEPTH:
            raise ParameterError(f"depth must be an integer in [0, {online_pmm.MAX_STREAM_DEPTH}], got {depth!r}")
        r, params = int(depth), {"depth": int(depth), "depth_rule": "explicit"}
    else:
        horizon = check_count("horizon_n", horizon_n, 10**15)
        assert horizon is not None
        if horizon_steps is None:
            r = online_pmm.default_depth(horizon, epsilon, d)
            params = {"depth": r, "depth_rule": "paper depth for horizon_n", "horizon_n": horizon}
        else:
            steps = check_count("horizon_steps", horizon_steps, 2**40)
            assert steps is not None
            r = online_pmm.horizon_depth(horizon, steps, epsilon, d)
            params = {"depth": r, "depth_rule": "paper depth at the counters' noise", "horizon_n": horizon,
                      "horizon_steps": steps}
    if depth is not None and horizon_steps is not None:
        raise ParameterError("horizon_steps goes with horizon_n, not with an explicit depth")
    if not growing:
        plan = plan_stream(r, d, epsilon)
    if rng is not None and not isinstance(rng, (str, int, np.integer)):
        raise ParameterError("a stream's rng is None, 'secure' or an int seed (a Generator cannot be stored)")
    _, seed = resolve_rng(rng)  # validates; the generator itself is not used (the key is)
    key = secrets.token_bytes(32) if seed is None else hashlib.blake2b(f"privsyn-stream-seed:{seed}".encode(),
                                                                       digest_size=32).digest()
    state = {"format": FORMAT, "version": VERSION, "mechanism": MECHANISM, "schema": schema.to_dict(),
             "epsilon": epsilon, "depth": r, "params": params, "neighbouring": online_pmm.RELATION,
             "ledger": [[s, e] for s, e in plan.ledger], "step": 0, "seed": seed, "key": key.hex(),
             "groups": [_pack_group(g) for g in StreamCounters.start(plan).groups], "binding": binding,
             "domain_policy": None if policy is None else policy.to_dict()}
    if path.exists() or path.is_symlink():
        raise StreamError(f"{path} already exists; a stream is created once (open it, or choose another path)")
    _save(path, state, exclusive=True)
    stream = Stream(path)
    stream._refresh(state)
    return stream


# -- the state file ------------------------------------------------------------------------------------------
def _pack(a: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(a, dtype="<i8").tobytes(), 1)).decode("ascii")


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text, validate=True)), dtype="<i8").astype(np.int64)


def _pack_counter(c: CounterState) -> dict[str, Any]:
    assert c.output is not None
    return {"block_true": _pack(c.block_true), "log_noisy": _pack(c.log_noisy), "output": _pack(c.output),
            "alpha_true": [_pack(a) for a in c.alpha_true], "alpha_noisy": [_pack(a) for a in c.alpha_noisy]}


def _counter(packed: dict[str, Any], step: int) -> CounterState:
    return CounterState(step, _unpack(packed["block_true"]), _unpack(packed["log_noisy"]),
                        [_unpack(a) for a in packed["alpha_true"]], [_unpack(a) for a in packed["alpha_noisy"]],
                        _unpack(packed["output"]))


def _pack_group(g: LevelGroup) -> dict[str, Any]:
    return {"first": g.first, "last": g.last, "opened": g.opened, "frozen": _pack(g.frozen),
            "counter": _pack_counter(g.counter)}


def _counters(state: dict[str, Any]) -> StreamCounters:
    """The open levels' counters of a (verified) state; a group's counter is at step ``step - opened + 1``."""
    step = state["step"]
    return StreamCounters(step, [LevelGroup(g["first"], g["last"], g["opened"], _unpack(g["frozen"]),
                                            _counter(g["counter"], max(0, step - g["opened"] + 1)))
                                 for g in state["groups"]])


def _plan(state: dict[str, Any]) -> StreamPlan:
    d, epsilon = len(state["schema"]["columns"]), check_epsilon(state["epsilon"])
    if state["params"].get("depth_rule") == "growing":
        return growing_plan(d, epsilon, state["depth"])
    return plan_stream(state["depth"], d, epsilon)


def _upgrade(state: dict[str, Any]) -> None:
    """An earlier state as version 4.  Version 1 (fixed depth, one counter): one group of every level, opened at
    step 1.  Versions 1 and 2: no ledger binding (the stream was not bound).  Versions 1 to 3: no release mode."""
    state.setdefault("binding", None)
    state.setdefault("domain_policy", None)
    if state["version"] == 1:
        size = 2 ** (state["depth"] + 1)
        counter = state.pop("counter")
        state["groups"] = [{"first": 0, "last": state["depth"], "opened": 1,
                            "frozen": _pack(np.zeros(size, dtype=np.int64)), "counter": counter}]


def _key(state: dict[str, Any]) -> bytes:
    return bytes.fromhex(state["key"])


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _save(path: Path, state: dict[str, Any], *, exclusive: bool = False) -> None:
    """Write the state atomically: temporary file (mode 0600) in the same folder, fsync, rename, fsync folder."""
    body = {k: v for k, v in state.items() if k != "checksum"}
    text = json.dumps({**body, "checksum": _checksum(body)}, sort_keys=True)
    folder = path.resolve().parent
    if not folder.is_dir():
        raise OutputError(f"no such folder: {folder}")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise OutputError(f"cannot write in folder {folder}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            os.link(tmp, path)  # fails if the path appeared meanwhile: never overwrite a stream
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except FileExistsError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise StreamError(f"{path} already exists; a stream is created once") from None
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"could not write {path}: {exc.strerror or exc}; it was left unchanged") from None
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


_REQUIRED = {"format": str, "version": int, "mechanism": str, "schema": dict, "epsilon": float, "depth": int,
             "params": dict, "neighbouring": str, "ledger": list, "step": int, "key": str, "checksum": str}
#: The counters' field of each version.
_COUNTERS = {1: ("counter", dict), 2: ("groups", list), 3: ("groups", list), 4: ("groups", list)}


def _load(path: Path) -> dict[str, Any]:
    """Read and verify a state file; any problem is one :class:`StreamError` line."""
    raw = _read_state(path)
    try:
        state = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise StreamError(f"the stream state {path} is corrupted (not JSON); restore it from a backup") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise StreamError(f"{path} is not a privsyn stream state")
    if not isinstance(state.get("version"), int) or state["version"] not in READABLE:
        raise StreamError(f"the stream state {path} has format version {state.get('version')!r}; this library reads "
                          f"versions {', '.join(map(str, READABLE))}: open it with the library that wrote it")
    for key, kind in [*_REQUIRED.items(), _COUNTERS[state["version"]]]:
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise StreamError(f"the stream state {path} is corrupted (field {key!r}); restore it from a backup")
    body = {k: v for k, v in state.items() if k != "checksum"}
    if _checksum(body) != state["checksum"]:
        raise StreamError(f"the stream state {path} is corrupted (checksum mismatch); restore it from a backup")
    try:
        schema = Schema.from_dict(state["schema"])
        if len(_key(state)) != 32 or not _binding_valid(state.get("binding")) or \
                (state["version"] >= 3 and "binding" not in state) or \
                (state["version"] >= 4 and "domain_policy" not in state):
            raise ValueError("the noise key is 256 bits; a binding names a ledger, a dataset and a stream")
        _stored_policy(schema, state.get("domain_policy"))
        plan = _plan(state)
        _upgrade(state)
        consistent = _consistent(_counters(state), plan, state["step"])
    except (PrivsynError, ValueError, TypeError, KeyError, AttributeError, zlib.error):
        raise StreamError(f"the stream state {path} is corrupted (its content); restore it from a backup") from None
    if [list(x) for x in plan.ledger] != state["ledger"] or math.fsum(e for _, e in plan.ledger) != state["epsilon"]:
        raise StreamError(f"the stream state {path} is corrupted (its ledger); restore it from a backup")
    if not consistent:
        raise StreamError(f"the stream state {path} is corrupted (its counters); restore it from a backup")
    return state


def _binding_valid(binding: Any) -> bool:
    """``None`` (a stream without a ledger) or the ledger's path, the dataset's name and the stream's id."""
    return binding is None or (isinstance(binding, dict) and set(binding) == {"ledger", "dataset", "stream"}
                               and all(isinstance(v, str) and v for v in binding.values()))


def _read_state(path: Path) -> bytes:
    """The state file's bytes: a regular file only (never a device, a pipe or a folder), read up to its size and
    at most :data:`MAX_STATE_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without a writer, and is refused below
    except FileNotFoundError:
        raise StreamError(f"no stream state at {path}; create one first (stream open ... / "
                          "open_stream(create=True))") from None
    except OSError as exc:
        raise StreamError(f"cannot read the stream state {path}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise StreamError(f"the stream state {path} is not a regular file; give the path of a state file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_STATE_BYTES:
            raise StreamError(f"the stream state {path} is larger than {MAX_STATE_BYTES} bytes: not a state this "
                              "library wrote; restore it from a backup")
        try:
            raw = handle.read(info.st_size + 1)
        except OSError as exc:
            raise StreamError(f"cannot read the stream state {path}: {exc.strerror}") from None
    if len(raw) != info.st_size:
        raise StreamError(f"the stream state {path} changed while it was read; try again")
    return raw


def _consistent(counters: StreamCounters, plan: StreamPlan, step: int) -> bool:
    """The groups cover levels ``0..depth`` in order, opened in order, with arrays of their sizes, and each
    counter's binary levels match its step."""
    groups = counters.groups
    if not all(type(x) is int for g in groups for x in (g.first, g.last, g.opened)):
        return False
    if step < 0 or not groups or groups[0].first != 0 or groups[0].opened != 1 or groups[-1].last > plan.depth:
        return False
    if not plan.growing and (len(groups) != 1 or groups[0].last != plan.depth):
        return False
    for before, after in itertools.pairwise(groups):
        if after.first != before.last + 1 or not before.opened <= after.opened <= step:
            return False
    for g in groups:
        c = g.counter
        arrays = [g.frozen, c.block_true, c.log_noisy, c.output, *c.alpha_true, *c.alpha_noisy]
        size = 2 ** (g.last + 1) - online_pmm.group_offset(g.first)
        if g.first > g.last or {len(a) for a in arrays if a is not None} != {size} or not c.well_formed():
            return False
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive, non-blocking lock on the state file for one step (another process adding: an error)."""
    if not path.exists():
        raise StreamError(f"no stream state at {path}; create one first (stream open ... / open_stream(create=True))")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # never waits on a FIFO; _load refuses what is not a file
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StreamError(f"another process is adding to the stream {path}; try again when it is done") from None
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            raise StreamError(f"the stream {path} changed while it was opened; try again")
        yield
    finally:
        os.close(fd)


__all__ = ["Stream", "StreamError", "open_stream"]
