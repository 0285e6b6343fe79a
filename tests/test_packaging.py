"""The package as a user gets it: a wheel built from pyproject.toml installs, imports and runs its console script;
its metadata declares exactly pyproject's dependencies (the single list: requirements.txt is ``-e .``); and
``import privsyn_core`` does not load the heavy libraries (POT, scikit-learn, Dask, Streamlit, Plotly)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
HEAVY = ("ot", "sklearn", "dask", "distributed", "streamlit", "plotly")


def _canonical(requirements: list[str]) -> set[str]:
    """Requirement strings in one spelling (name lower-cased, specifiers sorted), for a set comparison."""
    out = set()
    for text in requirements:
        req = Requirement(text)
        extras = ",".join(sorted(req.extras))
        spec = ",".join(sorted(str(s) for s in req.specifier))
        out.add(f"{req.name.lower().replace('_', '-')}[{extras}]{spec}")
    return out


def test_import_does_not_load_heavy_libraries():
    code = ("import json, sys, privsyn_core as ps; ps.list_mechanisms(); "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.slow
def test_metrics_loads_on_first_use():
    code = ("import sys, privsyn_core as ps; assert 'privsyn_core.evaluation.distances' not in sys.modules; "
            "assert ps.metrics.w1 is sys.modules['privsyn_core.evaluation.distances'].w1; "
            "from privsyn_core import metrics; assert metrics is ps.metrics; assert 'metrics' in dir(ps)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


#: The optional requirement files (the peers, and the benchmarks' own venvs): a core install has none of them.
OPTIONAL_REQUIREMENTS = ("requirements-peers.txt", "requirements-bench.txt", "requirements-smartnoise.txt")
#: What OpenDP pulls beside the names those files list.
PULLED_BY_OPENDP = ("polars", "jax")
#: What the ``[app]`` extra adds: the Plotly figures (:mod:`privsyn_core.reporting.figures`) need it, nothing else.
APP_PACKAGES = ("streamlit", "plotly")


def _listed(name: str) -> set[str]:
    """The packages a requirements file names (not its ``-e`` or ``-r`` lines), in their canonical spelling."""
    text = (ROOT / name).read_text(encoding="utf-8").splitlines()
    return {Requirement(line.split("#")[0]).name.lower().replace("_", "-") for line in text
            if line.strip() and not line.lstrip().startswith(("#", "-"))}


def _optional_packages() -> set[str]:
    return set().union(*map(_listed, OPTIONAL_REQUIREMENTS))


_REFUSING_FINDER = ("class Refuse:\n    def find_spec(self, name, path=None, target=None):\n"
                    "        if name.split('.')[0] in BLOCKED: raise ImportError(name)\n"
                    "sys.meta_path.insert(0, Refuse())\n")


def _failing_imports(blocked: set[str], *, finder: bool = False) -> tuple[int, list[str]]:
    """How many modules privsyn_core has, and those that fail to import with ``blocked`` made unimportable: absent
    from ``sys.modules`` (``None``), or with ``finder`` refused by an import finder that raises (an import hook)."""
    modules = sorted(name.replace("-", "_") for name in blocked)
    block = (f"BLOCKED = {set(modules)!r}\n" + _REFUSING_FINDER if finder
             else f"for name in {modules!r}: sys.modules[name] = None\n")
    code = ("import importlib, pkgutil, sys\n" + block +
            "import privsyn_core\nnames = [info.name for info in "
            "pkgutil.walk_packages(privsyn_core.__path__, 'privsyn_core.')]\nfailed = []\n"
            "for name in names:\n    try:\n        importlib.import_module(name)\n"
            "    except ImportError:\n        failed.append(name)\n"
            "print(len(names), *failed, sep='\\n')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    count, *failed = out.stdout.split()
    return int(count), failed


def test_optional_requirement_files_name_no_core_dependency():
    """A package the library needs is a core dependency, never only an optional file's: removing what an optional
    file installs leaves a working core install."""
    core = {Requirement(text).name.lower() for text in PYPROJECT["project"]["dependencies"]}
    assert _optional_packages() and not _optional_packages() & core


def test_every_module_imports_without_the_optional_peers():
    """Every module of privsyn_core imports with every optional file's packages and what OpenDP pulls blocked, so
    collection, doctests and the registry work on a core install; the peers import OpenDP inside their runs."""
    count, failed = _failing_imports(_optional_packages() | set(PULLED_BY_OPENDP))
    assert count > 50 and failed == []  # the walk found the tree, and all of it imports


def test_every_module_imports_when_an_import_finder_refuses_the_optional_peers():
    """The same when an import hook raises for the optional packages instead of finding nothing: the check for
    OpenDP (``opendp_available``) reads that as absent."""
    count, failed = _failing_imports(_optional_packages() | set(PULLED_BY_OPENDP), finder=True)
    assert count > 50 and failed == []


def test_only_the_plotly_figures_need_the_app_extra():
    """With Streamlit and Plotly blocked, every module of privsyn_core imports but the Plotly figures, whose failure
    shows that the block works: the reports, the CLI and the SVG charts run on a core install."""
    assert _failing_imports(set(APP_PACKAGES))[1] == ["privsyn_core.reporting.figures"]


def test_requirements_files_defer_to_pyproject():
    """requirements*.txt hold no list of their own: they install the package and its extras from pyproject."""
    def lines(name: str) -> list[str]:
        text = (ROOT / name).read_text(encoding="utf-8").splitlines()
        return [line.strip() for line in text if line.strip() and not line.lstrip().startswith("#")]

    assert lines("requirements.txt") == ["-e .[app]"]
    assert lines("requirements-dev.txt") == ["-e .[dev]"]
    assert {"app", "dev", "dask", "bench"} <= set(PYPROJECT["project"]["optional-dependencies"])


def test_version_is_written_once():
    import privsyn_core

    assert PYPROJECT["project"]["dynamic"] == ["version"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "privsyn_core._version.__version__"}
    assert privsyn_core.__version__.count(".") == 2


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built offline (the installed setuptools, no build isolation) from a copy of the sources."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(ROOT / "privsyn_core", src / "privsyn_core", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(dist), str(src)], check=True, capture_output=True, text=True)
    (found,) = dist.glob("privsyn_core-*.whl")
    return found


@pytest.mark.slow
def test_wheel_metadata_declares_pyproject_dependencies(wheel):
    import privsyn_core

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(zf.read(meta_name).decode())
        (entry_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = zf.read(entry_name).decode()
    assert meta["Version"] == privsyn_core.__version__
    requires = meta.get_all("Requires-Dist")
    base = [r for r in requires if "extra ==" not in r]
    assert _canonical(base) == _canonical(PYPROJECT["project"]["dependencies"])
    for extra, listed in PYPROJECT["project"]["optional-dependencies"].items():
        declared = [r.split(";")[0] for r in requires if f'extra == "{extra}"' in r]
        assert _canonical(declared) == _canonical(listed), extra
    assert "privsyn = privsyn_core.__main__:run" in entry_points
    # sub-packages are found (packages.find include = privsyn_core*): every module of the tree is in the wheel, and
    # so is its package data (package-data), e.g. the guide's evidence
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "privsyn_core").rglob("*.py")}
    data = {p.relative_to(ROOT).as_posix() for p in (ROOT / "privsyn_core").rglob("data/*.json")}
    assert "privsyn_core/evaluation/data/guide_evidence.json" in data
    assert modules | data <= set(names)


@pytest.mark.slow
def test_wheel_installs_and_runs(wheel, tmp_path):
    """Install the wheel (no dependencies: they are this environment's, the previous test checks the declared list)
    into a fresh venv, then, from outside the checkout, import it and run the ``privsyn`` console script.

    The venv sees this environment's packages through a path file naming its site folders (not
    ``--system-site-packages``, which would name the base interpreter's, not a virtual environment's); path files
    of those folders are not run, so the checkout's editable install stays out and the wheel's copy is imported."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    here = {sysconfig.get_paths()[name] for name in ("purelib", "platlib")}
    (Path(site) / "environment.pth").write_text("\n".join(sorted(here)) + "\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, text=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import privsyn_core; print(privsyn_core.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where  # the installed copy, not the checkout
    guide = subprocess.run([str(python), "-c", "from privsyn_core.evaluation.guide import shipped_evidence; "
                            "print(len(shipped_evidence()[1]))"], cwd=tmp_path, env=env, capture_output=True,
                           text=True)
    assert guide.returncode == 0 and int(guide.stdout) > 0, guide.stderr  # its package data came with it
    listing = subprocess.run([str(bindir / "privsyn"), "mechanisms"], cwd=tmp_path, env=env, capture_output=True,
                             text=True)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("pmm")
    bad = subprocess.run([str(bindir / "privsyn"), "synth", "missing.csv", "out.csv", "--mechanism", "pmm",
                          "--epsilon", "1"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 2, (bad.returncode, bad.stderr)  # main's int reaches the exit status
    assert len(bad.stderr.strip().splitlines()) == 1
