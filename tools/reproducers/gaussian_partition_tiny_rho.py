"""GaussianPartitionSelection with a tiny rho: memory must not grow with sigma.

The tail bound and the reporting probabilities once summed arrays of about 40 sigma doubles
(sigma = sqrt(1 / (2 rho))): rho = 1e-16 asked for 21 GiB. The address space is capped at
4 GiB here so that such a request fails fast with MemoryError instead of exhausting the machine.
Run: PYTHONPATH=src python tools/reproducers/gaussian_partition_tiny_rho.py
"""

from __future__ import annotations

import resource
import time

from dpkit.mechanisms import GaussianPartitionSelection


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    for rho in (1e-10, 1e-16, 1e-30, 1e-200):
        t = time.perf_counter()
        try:
            g = GaussianPartitionSelection.from_rho(rho=rho, threshold_delta=1e-6)
            out = g.release([0, 10**12, 2**62])
            msg = (
                f"sigma={g.sigma:.3g} tau={g.tau} threshold_delta={g.threshold_delta:.4g} "
                f"release={out.tolist()}"
            )
        except Exception as exc:
            msg = f"{type(exc).__name__}: {str(exc)[:80]}"
        print(f"rho={rho:g}: {msg} ({time.perf_counter() - t:.2f} s)")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
