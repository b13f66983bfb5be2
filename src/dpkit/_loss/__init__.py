"""The privacy-loss engine: dominating pairs of mechanisms and their grid/FFT composition.

A low layer (it imports only :mod:`dpkit.errors` and :mod:`dpkit._numeric`) shared by
:mod:`dpkit.accounting.pld`, :mod:`dpkit.fdp` and :mod:`dpkit.divergence`.
"""

__all__: list[str] = []
