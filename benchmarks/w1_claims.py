"""What bounds each mechanism's W1, from the registry (``MechanismSpec.w1_claim``): ``docs/tables/w1_claims.md``.

Usage::

    python -m benchmarks.w1_claims [--write]

One row per registered mechanism of this library (the OpenDP peers, run by OpenDP, are left out): its claim's
kind (a published theorem, a bound derived here, or measured only) and source.  ``tests/test_claims.py`` checks
that the committed table and the README's lists agree with the registry.
"""

from __future__ import annotations

import argparse

import privsyn_core as ps
from privsyn_core.mechanisms.base.spec import MechanismSpec

#: How each kind of claim reads in the table and the README.
KIND_LABELS = {"theorem": "W1 theorem", "derived": "W1 bound derived here", "measured": "measured only"}
NOTE = ("Which mechanisms have a bound on their expected W1 and where it comes from, read from the registry "
        "(`MechanismSpec.w1_claim`). Every private mechanism's privacy rests on a proof; its accuracy in W1 only where "
        "this table says theorem or derived. Measured W1 of every mechanism: "
        "[w1_rates.md](w1_rates.md), [pmm.md](pmm.md), [stream.md](stream.md) (online PMM, whose rate is derived "
        "in [../online_pmm.md](../online_pmm.md)).")


def own_mechanisms() -> list[MechanismSpec]:
    """The registered mechanisms whose noise this library draws (the peers run in OpenDP are left out)."""
    return [spec for spec in ps.list_mechanisms() if spec.implemented_by is None]


def claims_markdown() -> str:
    """The table: mechanism, kind of claim, source."""
    rows = ["| key | W1 accuracy | source |", "|---|---|---|"]
    rows += [f"| `{spec.name}` | {KIND_LABELS[spec.w1_claim.kind]} | {spec.w1_claim.source} |"
             for spec in own_mechanisms()]
    return NOTE + "\n\n" + "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write docs/tables/w1_claims.md")
    args = parser.parse_args()
    text = claims_markdown()
    print(text)
    if args.write:
        from benchmarks.docsection import write_table

        write_table("w1_claims", text, "python -m benchmarks.w1_claims --write")


if __name__ == "__main__":
    main()
