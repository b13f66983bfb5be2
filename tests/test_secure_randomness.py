"""No release path reaches a non-secure generator.

1. Dynamic: every module-level function and generator class of ``numpy.random`` and every
   function of the ``random`` module is replaced by one that raises; then every release path of
   ``dpkit.mechanisms`` and ``dpkit.noise`` runs with the default (secure) source and must
   succeed. The default source must be the OS-keyed one.
   The local-DP protocols (client ``randomize`` and server ``randomize_many``) are included.
2. Sources: a numpy ``Generator``/``RandomState`` or the ``random`` module passed as ``source`` is
   refused; a seeded ``RandomSource`` cannot be made without ``insecure=True``.
3. Static: an AST scan of ``src/dpkit`` finds no import of ``random``/``numpy.random`` and no
   ``np.random``/``numpy.random`` attribute access. The only randomness modules allowed are
   ``os.urandom`` (keying ``RandomSource``), ``cryptography`` (its AES-CTR keystream) and
   ``secrets`` (the standard-library-only LDP client, ``dpkit/ldp/client.py`` and
   ``dpkit/ldp/_sampling.py``, documented in their docstrings). There are no other exceptions.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit import noise
from dpkit.errors import InsecureRandomnessError
from dpkit.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    Laplace,
    RandomizedResponse,
    ReportNoisyMax,
)
from dpkit.noise import RandomSource, default_source

SRC_ROOT = Path(__file__).resolve().parent.parent / "src" / "dpkit"
SECRETS_ALLOWED = {"ldp/client.py", "ldp/_sampling.py"}


class InsecureCallError(AssertionError):
    """Raised by every patched non-secure generator entry point."""


def _trap(name: str) -> Callable[..., Any]:
    def trapped(*args: Any, **kwargs: Any) -> Any:
        raise InsecureCallError(f"a release path called the non-secure generator {name}")

    return trapped


@pytest.fixture
def no_insecure_generators(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    patched: list[str] = []
    for name in dir(np.random):
        if name.startswith("_"):
            continue
        obj = getattr(np.random, name)
        if callable(obj):
            monkeypatch.setattr(np.random, name, _trap(f"numpy.random.{name}"))
            patched.append(f"numpy.random.{name}")
    for name in (
        "random",
        "uniform",
        "randint",
        "randrange",
        "getrandbits",
        "choice",
        "choices",
        "shuffle",
        "sample",
        "gauss",
        "normalvariate",
        "expovariate",
        "lognormvariate",
        "vonmisesvariate",
        "gammavariate",
        "betavariate",
        "paretovariate",
        "weibullvariate",
        "triangular",
        "randbytes",
        "binomialvariate",
    ):
        if hasattr(random, name):
            monkeypatch.setattr(random, name, _trap(f"random.{name}"))
            patched.append(f"random.{name}")
    monkeypatch.setattr(random, "Random", _trap("random.Random"))
    return patched


def _ldp_paths() -> list[tuple[str, Callable[[], Any]]]:
    """Client ``randomize`` (standard library + secrets) and server ``randomize_many`` of every
    local-DP protocol."""
    from dpkit import ldp

    def categorical(cls: Any) -> Callable[[], Any]:
        def run() -> None:
            m = cls(epsilon=1.0, domain=8)
            m.randomize(3)
            m.randomize_many(np.arange(200) % 8)

        return run

    def numeric(cls: Any) -> Callable[[], Any]:
        def run() -> None:
            m = cls(epsilon=1.0)
            m.randomize(0.3)
            m.randomize_many(np.linspace(-1.0, 1.0, 200))

        return run

    def rr() -> None:
        m = ldp.RandomizedResponse(epsilon=1.0)
        m.randomize(1)
        m.randomize_many(np.array([0, 1, 1, 0]))

    return [
        *[(f"ldp.{c.__name__}", categorical(c)) for c in ldp.FREQUENCY_ORACLES],
        *[(f"ldp.{c.__name__}", numeric(c)) for c in (ldp.Duchi, ldp.Piecewise, ldp.Hybrid)],
        ("ldp.RandomizedResponse", rr),
    ]


def _release_paths() -> list[tuple[str, Callable[[], Any]]]:
    x = np.linspace(-3.0, 3.0, 1000)
    ints = np.arange(-50, 50)
    scores = np.array([0.0, 1.0, 5.0, 2.0])
    big = np.zeros(300_000)  # large enough for the threaded lattice path
    return [
        ("Laplace.release", lambda: Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0).release(x)),
        (
            "Laplace.release threaded",
            lambda: Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0).release(big),
        ),
        ("Gaussian.release", lambda: Gaussian.from_mu(mu=1.0, sensitivity=1.0).release(x)),
        (
            "Gaussian.release eps-delta",
            lambda: Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-6, sensitivity=1.0).release(
                big
            ),
        ),
        (
            "DiscreteLaplace.release",
            lambda: DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1).release(ints),
        ),
        (
            "DiscreteLaplace.release exact",
            lambda: DiscreteLaplace.from_epsilon(epsilon=1e-4, sensitivity=1).release(ints[:5]),
        ),
        (
            "DiscreteGaussian.release",
            lambda: DiscreteGaussian.from_sigma(sigma=2.0, sensitivity=1).release(ints),
        ),
        (
            "DiscreteGaussian.release exact",
            lambda: DiscreteGaussian.from_sigma(sigma=1e4, sensitivity=1).release(ints[:5]),
        ),
        (
            "ExponentialMechanism.release",
            lambda: ExponentialMechanism(epsilon=1.0, sensitivity=1.0).release(scores),
        ),
        (
            "ExponentialMechanism.release_many",
            lambda: ExponentialMechanism(epsilon=1.0, sensitivity=1.0, monotonic=True).release_many(
                np.zeros(10_000), count=40
            ),
        ),
        *[
            (
                f"ReportNoisyMax[{kind}].release",
                lambda kind=kind: ReportNoisyMax(
                    epsilon=1.0, sensitivity=1.0, noise=kind
                ).release_many(scores, count=50),
            )
            for kind in ("laplace", "exponential", "gumbel")
        ],
        (
            "RandomizedResponse.release",
            lambda: RandomizedResponse.from_epsilon(epsilon=1.0).release(ints > 0),
        ),
        *[
            (f"noise.{f.__name__}", lambda f=f, kw=kw: f(default_source(), size=100, **kw))
            for f, kw in (
                (noise.laplace, {"scale": 1.0}),
                (noise.gaussian, {"sigma": 1.0}),
                (noise.exponential, {"scale": 1.0}),
                (noise.gumbel, {"scale": 1.0}),
                (noise.geometric, {"p": 0.3}),
                (noise.discrete_laplace, {"scale": 2.0}),
                (noise.discrete_gaussian, {"sigma": 2.0}),
                (noise.laplace_lattice_noise, {"t": 3.0}),
                (noise.gaussian_lattice_noise, {"sigma": 3.0}),
                (noise.bernoulli, {"p": 0.3}),
                (noise.bernoulli_exp, {"gamma": 0.3}),
            )
        ],
        (
            "noise exact samplers",
            lambda: (
                noise.bernoulli_exact(default_source(), Fraction(1, 3)),
                noise.bernoulli_exp_exact(default_source(), Fraction(5, 2)),
                noise.discrete_laplace_exact(default_source(), Fraction(3, 2)),
                noise.discrete_gaussian_exact(default_source(), Fraction(9, 4)),
            ),
        ),
        (
            "RandomSource draws",
            lambda: (
                default_source().uniform(10),
                default_source().uniform_full(10),
                default_source().integers(7, 10),
                default_source().randbelow(10**30),
                default_source().bits(10),
                default_source().bytes(10),
            ),
        ),
        *_ldp_paths(),
    ]


def test_traps_are_armed(no_insecure_generators: list[str]) -> None:
    assert "numpy.random.default_rng" in no_insecure_generators
    assert "numpy.random.laplace" in no_insecure_generators
    assert "random.random" in no_insecure_generators
    with pytest.raises(InsecureCallError):
        np.random.default_rng()
    with pytest.raises(InsecureCallError):
        random.random()


@pytest.mark.parametrize("name", [n for n, _ in _release_paths()])
def test_release_path_uses_only_the_secure_source(
    name: str, no_insecure_generators: list[str]
) -> None:
    call = dict(_release_paths())[name]
    call()  # raises InsecureCallError if any non-secure generator is reached
    assert default_source().secure


def test_other_generators_are_refused_as_sources() -> None:
    mech = Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    rr = RandomizedResponse(p=0.75)
    for bad in (
        np.random.default_rng(0),
        np.random.RandomState(0),
        random,
        random.Random(0),
        np.random.PCG64(0),
    ):
        with pytest.raises(InsecureRandomnessError):
            mech.release([1.0], source=bad)  # type: ignore[arg-type]
        with pytest.raises(InsecureRandomnessError):
            em.release([1.0, 2.0], source=bad)  # type: ignore[arg-type]
        with pytest.raises(InsecureRandomnessError):
            rr.release([True], source=bad)  # type: ignore[arg-type]
    with pytest.raises(InsecureRandomnessError):
        RandomSource(seed=1)
    seeded = RandomSource(seed=1, insecure=True)
    assert not seeded.secure and "INSECURE" in repr(seeded)


# ---------------------------------------------------------------------------------------------
# Static scan
# ---------------------------------------------------------------------------------------------
def _violations(rel: str, text: str) -> list[str]:
    tree = ast.parse(text, filename=rel)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name
                if top == "random" or top.startswith("numpy.random"):
                    found.append(f"{rel}:{node.lineno}: import {top}")
                if top == "secrets" and rel not in SECRETS_ALLOWED:
                    found.append(f"{rel}:{node.lineno}: import secrets outside the LDP client")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if mod == "random" or mod.startswith("numpy.random"):
                found.append(f"{rel}:{node.lineno}: from {mod} import ...")
            if mod == "numpy" and any(a.name == "random" for a in node.names):
                found.append(f"{rel}:{node.lineno}: from numpy import random")
        elif isinstance(node, ast.Attribute) and node.attr == "random":
            if isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"):
                found.append(f"{rel}:{node.lineno}: {node.value.id}.random")
        elif isinstance(node, ast.Name) and node.id in ("default_rng", "RandomState"):
            found.append(f"{rel}:{node.lineno}: {node.id}")
    return found


def test_static_scan_finds_no_insecure_generator() -> None:
    files = sorted(SRC_ROOT.rglob("*.py"))
    assert len(files) > 10
    violations = [
        v for f in files for v in _violations(f.relative_to(SRC_ROOT).as_posix(), f.read_text())
    ]
    assert violations == [], "\n".join(violations)


def test_static_scan_catches_what_it_should() -> None:
    # Validity of the scanner: each forbidden form (5 of the 7 lines) is reported; a docstring
    # mentioning numpy.random is not.
    bad = (
        '"""Unlike numpy.random.laplace, ..."""\n'
        "import random\n"
        "import numpy as np\n"
        "from numpy.random import default_rng\n"
        "from numpy import random as r\n"
        "x = np.random.laplace(0, 1)\n"
        "import secrets\n"
    )
    found = _violations("mechanisms/probe.py", bad)
    assert sorted(int(f.split(":")[1]) for f in found) == [2, 4, 5, 6, 7], found
    assert _violations("ldp/client.py", "import secrets\n") == []
