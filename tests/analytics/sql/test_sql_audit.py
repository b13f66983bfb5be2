"""End-to-end audit of every answered corpus query on neighbouring tables.

D is the ``people`` table, D' adds one adversarial person with 216 rows spread over every
region, plan, device and region id, with values NaN, NULL, +-inf, +-1e308 and huge numbers
(``_sql_corpus.adversary``). Each answered query is translated once (a fixed bounding salt,
drawn from a seeded source) and its plan runs once on D and once on D' (DuckDB).

Two checks per query, both on the same exact pre-noise aggregates:

1. Exact (no randomness): the groups whose aggregates differ number at most
   ``max_partitions``, and for every noisy measure the difference vector has an L1 norm (for
   discrete Laplace noise) or a squared L2 norm (discrete Gaussian) at most the sensitivity the
   pricing calibrated the noise to; quantile bin counts move by at most ``P * R`` rows, and a
   group's count of distinct units by at most one. So the released noise covers the
   neighbour's influence: the "sensitivity usage" ratio is at most 1 for every query.
2. Statistical: the release (noise, partition selection, intervals; the fast batched release
   of ``_proof.batched_release``) is sampled ``SAMPLES`` times on each exact result and audited
   with :func:`dpkit.audit.audit` at confidence ``1 - 1e-6`` against the query's claimed
   ``(epsilon, delta)``: no certified lower bound may exceed the claim. A release is a
   mixture over salts of per-salt mechanisms that each satisfy the claim (see
   ``test_e2e_audit``), so auditing one salt is the stricter test. HAVING, ORDER BY and LIMIT
   act on the released rows only (post-processing), so auditing the release before them is
   enough.

A companion shows the audit has power on these queries: the same harness on a plan whose
contribution bounds are removed (the adversary's 216 rows all kept while the noise assumes
``P = 2, R = 3``) certifies more than the claim.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import pytest
import yaml
from _proof import audit_pair, sensitivity_usage
from _sql_corpus import METADATA_YAML, answered, neighbours, public_tables

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Bound, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.audit import Claim
from dpkit.noise import RandomSource

CONFIDENCE = 1.0 - 1e-6
EPSILON = 1.0
DELTA = 1e-5
# 4,000 releases per table (half select the test, half evaluate it), as in test_e2e_audit:
# there the same size gives the tight single-count query a certified 0.3-1.0 (so an honest
# audit is not vacuous), and here the whole corpus audits in well under a minute. The companion
# (no bounding: one count moves by ~200 rows against a noise scale of ~6 rows) is caught by a
# wide margin.
SAMPLES = 4000
# Each corpus query is audited on 2 x 4,000 releases: 20-50 s a query on a busy machine.
pytestmark = pytest.mark.slow
META = yaml.safe_load(METADATA_YAML)


@pytest.fixture(scope="module")
def world() -> dict[str, Any]:
    d, d_prime = neighbours()
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    return {"engine": engine, "d": d}


def _prepared(world: dict[str, Any], sql: str, delta: bool, seed: int = 5) -> Any:
    budget = Budget(epsilon=10.0, delta=1e-3, method="basic") if delta else Budget(epsilon=10.0)
    session = dpa.Session(
        world["d"],
        privacy_unit="user_id",
        budget=budget,
        engine=world["engine"],
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )
    sq = session.sql_query(sql, metadata=META, public_tables=public_tables())
    return sq.prepare(epsilon=EPSILON, delta=DELTA if delta else None)


@pytest.mark.parametrize("name", sorted(answered()))
def test_answered_query_stays_within_its_claim_on_neighbouring_tables(
    world: dict[str, Any], name: str
) -> None:
    entry = answered()[name]
    p = _prepared(world, entry.sql, entry.delta)
    engine = world["engine"]
    ra = p.exact(engine, Source(kind="table", location="d"))
    rb = p.exact(engine, Source(kind="table", location="d_prime"))
    usage = sensitivity_usage(p, ra, rb)
    assert usage <= 1.0
    claim = (
        Claim.approx(epsilon=EPSILON, delta=DELTA) if entry.delta else Claim.pure(epsilon=EPSILON)
    )
    res = audit_pair(
        p, ra, rb, claim, seed=zlib.crc32(name.encode()), samples=SAMPLES, confidence=CONFIDENCE
    )
    print(
        f"{name}: sensitivity usage {usage:.3f}, certified epsilon "
        f"{res.epsilon_lower_bound:.3f} (claim {EPSILON})"
    )
    assert not res.violated
    assert res.epsilon_lower_bound <= EPSILON


def test_the_adversary_saturates_the_bounds(world: dict[str, Any]) -> None:
    """The exact check is not vacuous: on a count, the adversary's 216 rows move the global
    count by exactly max_rows_per_partition = 3, the whole calibrated sensitivity."""
    p = _prepared(world, answered()["total_rows"].sql, False)
    engine = world["engine"]
    ra = p.exact(engine, Source(kind="table", location="d"))
    rb = p.exact(engine, Source(kind="table", location="d_prime"))
    assert rb.values["n:n"][0] - ra.values["n:n"][0] == 3
    assert sensitivity_usage(p, ra, rb) == 1.0


def test_audit_catches_the_corpus_query_without_contribution_bounding(
    world: dict[str, Any],
) -> None:
    entry = answered()["rows_per_region"]
    p = _prepared(world, entry.sql, entry.delta)
    unbounded = dataclasses.replace(
        p.plan,
        bound=Bound(
            privacy_unit="user_id",
            max_partitions=1 << 20,
            max_rows_per_partition=1 << 20,
            salt=p.plan.bound.salt,
        ),
    )
    broken = dataclasses.replace(p, plan=unbounded)
    engine = world["engine"]
    ra = broken.exact(engine, Source(kind="table", location="d"))
    rb = broken.exact(engine, Source(kind="table", location="d_prime"))
    assert sensitivity_usage(p, ra, rb) > 1.0  # the exact check sees it too
    res = audit_pair(
        p, ra, rb, Claim.pure(epsilon=EPSILON), seed=99, samples=SAMPLES, confidence=CONFIDENCE
    )
    print("broken (no bounding):", res.summary())
    assert res.violated
    assert res.epsilon_lower_bound > EPSILON
