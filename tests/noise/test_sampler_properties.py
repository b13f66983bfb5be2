"""Hypothesis properties of the samplers: shapes, dtypes, supports, reproducibility, refusals."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import noise
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource

shapes = st.one_of(
    st.integers(0, 300),
    st.lists(st.integers(0, 12), min_size=0, max_size=3).map(tuple),
)
scales = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)
probs = st.floats(0.0, 1.0, allow_nan=False)
seeds = st.integers(0, 2**32)

# name -> (call(source, param, size), parameter strategy, dtype, support check)
SAMPLERS: dict[
    str,
    tuple[Callable[..., np.ndarray], st.SearchStrategy[float], type, Callable[[np.ndarray], bool]],
] = {
    "laplace": (
        lambda s, b, n: noise.laplace(s, scale=b, size=n),
        scales,
        np.float64,
        lambda x: bool(np.all(np.isfinite(x))),
    ),
    "gaussian": (
        lambda s, b, n: noise.gaussian(s, sigma=b, size=n),
        scales,
        np.float64,
        lambda x: bool(np.all(np.isfinite(x))),
    ),
    "exponential": (
        lambda s, b, n: noise.exponential(s, scale=b, size=n),
        scales,
        np.float64,
        lambda x: bool(np.all((x >= 0) & np.isfinite(x))),
    ),
    "gumbel": (
        lambda s, b, n: noise.gumbel(s, scale=b, size=n),
        scales,
        np.float64,
        lambda x: bool(np.all(np.isfinite(x))),
    ),
    "geometric": (
        lambda s, p, n: noise.geometric(s, p=p, size=n),
        st.floats(1e-9, 1.0, allow_nan=False),
        np.int64,
        lambda x: bool(np.all(x >= 0)),
    ),
    "discrete_laplace": (
        lambda s, t, n: noise.discrete_laplace(s, scale=t, size=n),
        scales,
        np.int64,
        lambda x: True,
    ),
    "discrete_gaussian": (
        lambda s, g, n: noise.discrete_gaussian(s, sigma=g, size=n),
        st.floats(1e-3, 1e4),
        np.int64,
        lambda x: True,
    ),
    "laplace_lattice_noise": (
        lambda s, t, n: noise.laplace_lattice_noise(s, t=t, size=n),
        st.floats(1e-3, 2.0**14),
        np.int64,
        lambda x: True,
    ),
    "gaussian_lattice_noise": (
        lambda s, g, n: noise.gaussian_lattice_noise(s, sigma=g, size=n),
        st.floats(1e-3, 2.0**14),
        np.int64,
        lambda x: True,
    ),
    "bernoulli": (lambda s, p, n: noise.bernoulli(s, p=p, size=n), probs, np.bool_, lambda x: True),
    "bernoulli_exp": (
        lambda s, g, n: noise.bernoulli_exp(s, gamma=g, size=n),
        st.floats(0.0, 800.0),
        np.bool_,
        lambda x: True,
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_shape_dtype_support_and_reproducibility(name: str, data: st.DataObject) -> None:
    call, params, dtype, support = SAMPLERS[name]
    param = data.draw(params, label="param")
    size = data.draw(shapes, label="size")
    seed = data.draw(seeds, label="seed")
    x = call(RandomSource(seed=seed, insecure=True), param, size)
    expected = (size,) if isinstance(size, int) else size
    assert x.shape == expected
    assert x.dtype == dtype
    assert support(x)
    y = call(RandomSource(seed=seed, insecure=True), param, size)
    assert np.array_equal(x, y)


@settings(max_examples=30, deadline=None)
@given(t=st.floats(0.5, 2.0**14), seed=seeds)
def test_lattice_noise_is_bounded_by_the_exponential_range(t: float, seed: int) -> None:
    z = noise.laplace_lattice_noise(RandomSource(seed=seed, insecure=True), t=t, size=2000)
    # |Z| <= rint(708 t) + 1: the sampler's Exp(1) never exceeds -ln(2**-1022) ~ 708.4.
    assert np.all(np.abs(z) <= math.ceil(709 * t))


@settings(max_examples=30, deadline=None)
@given(p=st.floats(0.0, 1.0), seed=seeds)
def test_bernoulli_end_points(p: float, seed: int) -> None:
    s = RandomSource(seed=seed, insecure=True)
    assert not noise.bernoulli(s, p=0.0, size=100).any()
    assert noise.bernoulli(s, p=1.0, size=100).all()
    assert noise.bernoulli_exp(s, gamma=0.0, size=100).all()


@settings(max_examples=20, deadline=None)
@given(num=st.integers(1, 40), den=st.integers(1, 40), seed=seeds)
def test_exact_samplers_return_python_types(num: int, den: int, seed: int) -> None:
    s = RandomSource(seed=seed, insecure=True)
    frac = Fraction(num, den)
    assert isinstance(noise.discrete_laplace_exact(s, frac), int)
    assert isinstance(noise.discrete_gaussian_exact(s, frac), int)
    assert isinstance(noise.bernoulli_exp_exact(s, frac), bool)
    assert isinstance(noise.bernoulli_exact(s, Fraction(min(num, den), den)), bool)


BAD_POSITIVE = [0.0, -1.0, -0.0, math.nan, math.inf, -math.inf, True, "1", 1j, None, [1.0]]


@pytest.mark.parametrize("name", [n for n in SAMPLERS if n not in ("bernoulli", "geometric")])
@pytest.mark.parametrize("bad", BAD_POSITIVE, ids=repr)
def test_invalid_scale_refused(name: str, bad: object) -> None:
    call = SAMPLERS[name][0]
    if name == "bernoulli_exp" and bad in (0.0, -0.0):
        return  # gamma = 0 is valid: Bernoulli(exp(0)) = 1
    with pytest.raises(PrivacyParameterError):
        call(RandomSource(seed=0, insecure=True), bad, 3)
