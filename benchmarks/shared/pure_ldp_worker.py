"""One pure-ldp run for ``benchmarks/ldp.py --heavy``, inside pure-ldp's own environment.

pure-ldp 1.2.0 needs numpy < 1.26 for its count-mean sketches (``np.zeros(None)`` in its
frequency-oracle base class), so it runs in a separate virtual environment
(``make .venv-pureldp/bin/python``) and never imports dpkit. The parent writes the users' items
(``int64``, one per user) to a ``.npy`` file; this script privatises them one user at a time
with pure-ldp's clients, aggregates them with its server and prints one JSON line:
``{"seconds": ..., "items": [...], "counts": [...]}`` (heavy hitters) or
``{"seconds": ..., "counts": [...]}`` (sketch estimates of the items in ``--query``).

Heavy hitters use pure-ldp's Hadamard count-mean sketch as their frequency oracle (its default,
OLH over the whole domain, scans all 2^bits items for every report and does not finish a
thousand users at 2^20).

Usage: ``python pure_ldp_worker.py KIND EPS BITS TOP DATA.npy [QUERY.npy] [--width M]
[--hashes K]`` with KIND one of ``PEM``, ``TreeHistogram``, ``CMS``, ``HCMS``.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from typing import Any

import numpy as np


def _opt(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def _sketch(eps: float, width: int, hashes: int, hadamard: bool) -> tuple[Any, Any]:
    from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer

    server = CMSServer(eps, hashes, width, is_hadamard=hadamard)
    client = CMSClient(eps, server.get_hash_funcs(), width, is_hadamard=hadamard)
    return client, server


def heavy(kind: str, eps: float, bits: int, top: int, x: np.ndarray, width: int, hashes: int):
    client_fo, server_fo = _sketch(eps, width, hashes, hadamard=True)
    if kind == "PEM":
        from pure_ldp.heavy_hitters.prefix_extending.pem_client import PEMClient
        from pure_ldp.heavy_hitters.prefix_extending.pem_server import PEMServer

        # prefixes of 12, 16, 20, ... bits (start 8 + steps of 4), one group per length
        server: Any = PEMServer(eps, 8, bits, 4, fo_server=server_fo)
        client: Any = PEMClient(eps, 8, bits, 4, fo_client=client_fo)
    else:
        from pure_ldp.heavy_hitters.treehistogram.treehist_client import TreeHistClient
        from pure_ldp.heavy_hitters.treehistogram.treehist_server import TreeHistServer

        server = TreeHistServer(eps, bits, 4, fo_server=server_fo)
        client = TreeHistClient(eps, 4, bits, fo_client=client_fo)
    start = time.perf_counter()
    for v in x.tolist():
        server.aggregate(client.privatise(format(v, f"0{bits}b")))
    found, freqs = server.find_heavy_hitters(k=top)
    seconds = time.perf_counter() - start
    items = [int(s.split("*")[0], 2) for s in found]
    return {"seconds": seconds, "items": items, "counts": [float(f) for f in freqs]}


def sketch(kind: str, eps: float, x: np.ndarray, query: np.ndarray, width: int, hashes: int):
    client, server = _sketch(eps, width, hashes, hadamard=kind == "HCMS")
    start = time.perf_counter()
    for v in x.tolist():
        server.aggregate(client.privatise(v))
    est = [float(server.estimate(int(v), suppress_warnings=True)) for v in query.tolist()]
    return {"seconds": time.perf_counter() - start, "counts": est}


def main() -> None:
    warnings.filterwarnings("ignore")
    kind, eps, bits, top = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    x = np.load(sys.argv[5]).astype(np.int64)
    width, hashes = _opt("--width", 1024), _opt("--hashes", 128)
    if kind in ("PEM", "TreeHistogram"):
        out = heavy(kind, eps, bits, top, x, width, hashes)
    else:
        out = sketch(kind, eps, x, np.load(sys.argv[6]).astype(np.int64), width, hashes)
    out["numpy"] = np.__version__
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
