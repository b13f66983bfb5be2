"""Small exact-geometry helpers for piecewise-linear trade-off functions."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["lower_convex_hull", "sampled_lower_bound", "upper_envelope_of_lines"]

FloatArray = NDArray[np.float64]


def _cross(ox: float, oy: float, ax: float, ay: float, bx: float, by: float) -> float:
    return (ax - ox) * (by - oy) - (ay - oy) * (bx - ox)


def lower_convex_hull(x: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Vertices of the lower convex hull of points sorted by x (Andrew's monotone chain).

    The piecewise-linear function through the returned vertices is the greatest convex function
    lying below every point, so it never exceeds the data (a *lower* bound, the safe side for a
    trade-off function). Among points with equal x the lowest is kept.
    """
    order = np.lexsort((y, x))
    xs = x[order]
    ys = y[order]
    keep = np.ones(xs.size, dtype=bool)
    keep[1:] = xs[1:] != xs[:-1]  # first of each run of equal x has the smallest y
    xs = xs[keep]
    ys = ys[keep]
    hx: list[float] = []
    hy: list[float] = []
    for px, py in zip(xs.tolist(), ys.tolist(), strict=True):
        while len(hx) >= 2 and _cross(hx[-2], hy[-2], hx[-1], hy[-1], px, py) <= 0.0:
            hx.pop()
            hy.pop()
        hx.append(px)
        hy.append(py)
    return np.asarray(hx, dtype=np.float64), np.asarray(hy, dtype=np.float64)


def upper_envelope_of_lines(
    slopes: FloatArray, intercepts: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Knots on [0, 1] of ``max(0, max_j intercepts_j + slopes_j * x)``.

    Returns the abscissae (0, the kinks inside (0, 1), 1) and the envelope at those abscissae
    (at a kink, the larger of the two lines meeting there; at 0 and 1 the maximum over the hull
    lines). Slopes must be <= 0. O(m log m) for m lines.
    """
    m = np.concatenate([np.asarray(slopes, dtype=np.float64), [0.0]])
    c = np.concatenate([np.asarray(intercepts, dtype=np.float64), [0.0]])
    ok = np.isfinite(m) & np.isfinite(c)
    m = m[ok]
    c = c[ok]
    order = np.lexsort((c, m))  # slope ascending, ties by intercept ascending
    m = m[order]
    c = c[order]
    # Keep, for each slope, the largest intercept (the last of each run).
    last = np.ones(m.size, dtype=bool)
    last[:-1] = m[1:] != m[:-1]
    m = m[last]
    c = c[last]
    hm: list[float] = []
    hc: list[float] = []
    for mi, ci in zip(m.tolist(), c.tolist(), strict=True):
        while hm:
            if len(hm) >= 2:
                # line j=-1 is useless if the new line overtakes j=-2 no later than j=-1 does.
                x12 = (hc[-2] - hc[-1]) / (hm[-1] - hm[-2])
                x13 = (hc[-2] - ci) / (mi - hm[-2])
                if x13 <= x12:
                    hm.pop()
                    hc.pop()
                    continue
            break
        hm.append(mi)
        hc.append(ci)
    hm_a = np.asarray(hm, dtype=np.float64)
    hc_a = np.asarray(hc, dtype=np.float64)
    # kink between consecutive hull lines j, j+1; the envelope there is their common value
    xk = (hc_a[:-1] - hc_a[1:]) / (hm_a[1:] - hm_a[:-1])
    yk = np.maximum(hc_a[:-1] + hm_a[:-1] * xk, hc_a[1:] + hm_a[1:] * xk)
    inside = (xk > 0.0) & (xk < 1.0)
    ends = np.asarray([0.0, 1.0])
    yends = np.max(hc_a[None, :] + hm_a[None, :] * ends[:, None], axis=1)
    xs = np.concatenate([[0.0], xk[inside], [1.0]])
    ys = np.concatenate([[yends[0]], yk[inside], [yends[1]]])
    order = np.argsort(xs, kind="stable")
    return xs[order], np.maximum(ys[order], 0.0)


def sampled_lower_bound(x: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A piecewise-linear lower bound of a convex non-increasing function from exact samples.

    For a convex function the secant of an interval, extended beyond it, lies *below* the
    function. So on ``[x_i, x_{i+1}]`` the function is at least the larger of the extended
    secants of the two neighbouring intervals; the two meet inside the interval. On the first
    interval the bound is the extended secant of the second one; on the last, the extended
    secant of the one before it, floored at 0. The returned knots are the samples plus one
    meeting point per interval, passed through the lower convex hull.
    """
    n = x.size
    if n < 3:
        return x.copy(), y.copy()
    dx = np.diff(x)
    s = np.diff(y) / dx  # slope of each interval
    px: list[FloatArray] = [x]
    py: list[FloatArray] = [y]
    # interior intervals i = 1 .. n-3 use secants i-1 and i+1
    i = np.arange(1, n - 2)
    if i.size:
        sl = s[i - 1]
        sr = s[i + 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            xm = (y[i + 1] - y[i] + sl * x[i] - sr * x[i + 1]) / (sl - sr)
        good = np.isfinite(xm) & (sl < sr)
        xm = np.clip(np.where(good, xm, x[i]), x[i], x[i + 1])
        ym = np.maximum(y[i] + sl * (xm - x[i]), y[i + 1] + sr * (xm - x[i + 1]))
        px.append(xm[good])
        py.append(ym[good])
    # First interval: secant_1 extended to the left passes through (x_1, y_1) and lies below f;
    # it rises above y_1, so it is the bound there. Its value at x_0 replaces y_0 (the chord from
    # (x_0, y_0) would lie above f).
    left = y[1] + s[1] * (x[0] - x[1])
    px.append(np.asarray([x[0]]))
    py.append(np.asarray([min(y[0], left)]))
    # Last interval: max(0, secant_{n-3} extended to the right), with a knot where it hits 0.
    sn = s[n - 3]
    right = y[n - 2] + sn * (x[n - 1] - x[n - 2])
    if right < 0.0 and sn < 0.0:
        xz = x[n - 2] - y[n - 2] / sn
        if x[n - 2] < xz < x[n - 1]:
            px.append(np.asarray([xz]))
            py.append(np.asarray([0.0]))
    px.append(np.asarray([x[n - 1]]))
    py.append(np.asarray([min(y[n - 1], max(0.0, right))]))
    ax = np.concatenate(px)
    ay = np.concatenate(py)
    return lower_convex_hull(ax, ay)
