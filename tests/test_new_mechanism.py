"""A new mechanism is one module and nothing else.

``tests/data/throwaway_mechanism.py`` registers ``throwaway_cells``; loaded as a pytest plugin, it must pass the
registry-driven suites (the API contract, the privacy audit at full budget with its detection case, and the
release surface) with no edit anywhere else.  A variant that halves its noise must fail the audit: the suites can
fail for it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "tests" / "data" / "throwaway_mechanism.py"
SUITES = ["tests/test_api.py", "tests/test_audit.py", "tests/test_release_surface.py"]


def _run_suites(plugin_dir: Path, suites: list[str], select: str = "throwaway_cells") -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_dir), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "-p", "throwaway_mechanism", "-p", "no:cacheprovider", "-q",
           "-m", "", "-k", select, *suites]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    return done.returncode, done.stdout + done.stderr


def _counts(output: str) -> dict[str, int]:
    return {word: int(count) for count, word in re.findall(r"(\d+) (passed|failed|error|skipped)", output)}


@pytest.mark.slow
def test_a_new_mechanism_module_passes_every_registry_driven_suite(tmp_path: Path) -> None:
    (tmp_path / "throwaway_mechanism.py").write_text(MODULE.read_text())
    code, output = _run_suites(tmp_path, SUITES)
    counts = _counts(output)
    assert code == 0, output[-3000:]
    assert counts.get("passed", 0) >= 18 and "failed" not in counts, output[-3000:]


@pytest.mark.slow
def test_the_same_module_with_half_its_noise_fails_the_audit(tmp_path: Path) -> None:
    broken = MODULE.read_text().replace("sensitivity / epsilon, (layout", "0.5 * sensitivity / epsilon, (layout")
    assert broken != MODULE.read_text()
    (tmp_path / "throwaway_mechanism.py").write_text(broken)
    code, output = _run_suites(tmp_path, ["tests/test_audit.py"], "throwaway_cells and passes_at_full_budget")
    assert code != 0 and _counts(output).get("failed", 0) >= 1, output[-3000:]
