"""Independent reference: the privacy profile of n composed Laplace mechanisms, by mpmath.

No grid and no code of the library: the privacy loss of one Laplace mechanism ``Lap(mu, 1)``
against ``Lap(0, 1)`` has, under the first law, an atom ``+mu`` of mass 1/2, an atom ``-mu`` of
mass ``e^-mu / 2`` and the density ``e^{-(mu - l)/2} / 4`` on ``(-mu, mu)``, so its moment
generating function is, in closed form,

    M(z) = e^{z mu}/2 + e^{-(1 + z) mu}/2 + e^{z mu} (1 - e^{-(1 + 2z) mu}) / (2 (1 + 2z)).

With ``S`` the sum of ``n`` losses, ``delta(eps) = E[(1 - e^{eps - S})_+]``. The payoff
``g(s) = (1 - e^{eps - s})_+`` has the Fourier transform ``e^{i xi eps} / (i xi (i xi - 1))``
on ``Im xi > 0``, so (Fourier inversion along ``Im xi = 1/2``, Lewis 2001 for option payoffs)

    delta(eps) = (1/pi) int_0^inf Re[ e^{i xi eps} M(1/2 - i u)^n / (i xi (i xi - 1)) ] du,
    xi = u + i/2.

The integrand is sharply peaked at ``u = j pi / mu`` (where the two atoms align); the
integral is split there and truncated at ``U = J pi / mu``. Tail bound: for ``u >= U``,
``|integrand| <= e^{-eps/2} (A(u) + c)^n / u^2`` with the atoms' part
``A(u) = |e^{mu/2 - i u mu} + e^{-3mu/2 + i u mu}| / 2`` (period ``pi / mu``) and
``c = e^{mu/2} (1 + e^{-2 mu}) / (4 U)`` bounding the continuous part; summing
``1/u^2 <= (mu / (j pi))^2`` over the periods ``j >= J`` gives
``e^{-eps/2} I (mu/pi)^2 / (J - 1) / pi`` with ``I`` the integral of ``(A + c)^n`` over one
period.
"""

from __future__ import annotations

import mpmath as mp


def laplace_composition_delta(
    mu: float, n: int, eps: float, *, peaks: int = 16, dps: int = 20
) -> tuple[float, float]:
    """``(delta, error_bound)`` for ``n`` Laplace mechanisms of parameter ``mu`` at ``eps``.

    ``error_bound`` bounds the truncation of the integral (the quadrature itself runs at
    ``dps`` digits, far below it).
    """
    with mp.workdps(dps):
        m = mp.mpf(mu)
        e = mp.mpf(eps)
        half = mp.mpf(1) / 2

        def mgf(z: mp.mpc) -> mp.mpc:
            cont = mp.exp(z * m) * (1 - mp.exp(-(1 + 2 * z) * m)) / (2 * (1 + 2 * z))
            return mp.exp(z * m) / 2 + mp.exp(-(1 + z) * m) / 2 + cont

        def integrand(u: mp.mpf) -> mp.mpf:
            xi = mp.mpc(u, half)
            ixi = 1j * xi
            val = mp.exp(ixi * e) * mgf(mp.mpc(half, -u)) ** n / (ixi * (ixi - 1))
            return mp.re(val)

        step = mp.pi / m
        # within a peak the scale is about 1 / (sqrt(n) mu): subdivide around each centre
        width = 1 / (mp.sqrt(n) * m)
        pts: list[mp.mpf] = [mp.mpf(0)]
        for j in range(peaks + 1):
            c = j * step
            for w in (1, 4, 16):
                for p in (c - w * width, c + w * width):
                    if 0 < p < peaks * step:
                        pts.append(p)
            if j:
                pts.append(c)
        pts = sorted(set(pts))
        total = mp.quad(integrand, pts) / mp.pi
        c = mp.exp(m / 2) * (1 + mp.exp(-2 * m)) / (4 * peaks * step)

        def envelope(u: mp.mpf) -> mp.mpf:
            atoms = mp.sqrt(mp.exp(m) + mp.exp(-3 * m) + 2 * mp.exp(-m) * mp.cos(2 * u * m)) / 2
            return (atoms + c) ** n

        per = [p for p in pts if p <= step] + [step]
        one_period = mp.quad(envelope, sorted(set(per)))
        tail = mp.exp(-e / 2) * one_period * (m / mp.pi) ** 2 / (peaks - 1) / mp.pi
        return float(total), float(tail)
