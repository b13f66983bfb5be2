"""MST's domain compression: rare cells merged from the noisy 1-way counts, split back in the model.

McKenna, Miklau and Sheldon (2021), Section 4: after the 1-way measurements, the cells of a
column whose noisy count is below ``3 sigma_1`` are merged into one cell for the selection and
the 2-way measurements. It is post-processing of the released counts, so the charge must not
move; the fitted model must still cover (and sample) every merged cell.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.noise import RandomSource
from dpkit.synth import MST, Categorical, SyntheticModel
from dpkit.synth import mst as mst_module
from dpkit.synth._tree import fit_tree
from dpkit.synth.mst import compressed_cells

COLOURS = ["red", "green", "blue", "cyan", "pink", "grey"]
DOMAINS = {
    "colour": Categorical(COLOURS),
    "size": Categorical(["s", "m", "l"]),
    "shape": Categorical(["round", "square"]),
}


def _table(n: int = 6_000, seed: int = 0) -> pd.DataFrame:
    """Three frequent colours, three that never occur; size depends on colour."""
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2])
    size = np.where(colour == "red", "l", rng.choice(["s", "m"], n))
    return pd.DataFrame(
        {"colour": colour, "size": size, "shape": rng.choice(["round", "square"], n)}
    )


def _session(budget: Any, seed: int = 5) -> Session:
    return Session(
        _table(),
        privacy_unit=None,
        budget=budget,
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )


# ------------------------------------------------------------------ the merge rule


def test_cells_below_three_sigma_are_merged_last() -> None:
    noisy = np.array([100.0, 29.9, 3.0, 30.0, 12.0])
    # rare: 29.9, 3 and 12 (below 3 * 10); the kept cells keep their order
    assert compressed_cells(noisy, 10.0).tolist() == [0, 2, 2, 1, 2]


def test_rare_cells_without_a_positive_count_are_dropped() -> None:
    noisy = np.array([100.0, 29.9, -3.0, 30.0, 0.0, 12.0])
    assert compressed_cells(noisy, 10.0).tolist() == [0, 2, -1, 1, -1, 2]
    # a single rare cell left is not merged (it keeps its place); a column is never emptied
    assert compressed_cells(np.array([100.0, 1.0, 50.0, -2.0]), 10.0).tolist() == [0, 1, 2, -1]
    assert compressed_cells(np.array([-5.0, 0.0]), 10.0).tolist() == [0, 0]


def test_a_single_rare_cell_is_not_merged() -> None:
    assert compressed_cells(np.array([100.0, 1.0, 50.0]), 10.0).tolist() == [0, 1, 2]
    assert compressed_cells(np.array([100.0, 50.0]), 10.0).tolist() == [0, 1]


def test_the_merge_reads_the_noisy_counts_not_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # The 1-way noise is replaced by one that makes the frequent "red" look rare and the empty
    # "cyan" look frequent: the merge must follow the noisy counts, whatever the true ones.
    real = mst_module.add_noise
    seen: list[np.ndarray] = []

    def noise(x: np.ndarray, sigma: float, source: Any) -> np.ndarray:
        if x.ndim == 1 and x.size == len(COLOURS) + 1:
            fake = np.array([1, 2_000, 1_000, 5_000, 1, 1, 0], dtype=np.int64)
            seen.append(fake)
            return fake
        out: np.ndarray = real(x, sigma, source)
        if x.ndim == 1:
            seen.append(out)
        return out

    monkeypatch.setattr(mst_module, "add_noise", noise)
    model = MST(DOMAINS).fit(_session(Budget(rho=1.0)), rho=1.0)
    # red (0), pink (4) and grey (5) are merged, the missing cell (6) dropped; cyan (3) kept
    assert model.info["merged"]["colour"] == [0, 4, 5]
    assert model.info["dropped"]["colour"] == [6]
    assert model.marginal("colour")[6] == 0.0
    sigma = model.info["sigma_1"]
    for col, noisy in zip(DOMAINS, seen, strict=True):
        cells = compressed_cells(noisy.astype(np.float64), sigma)
        merged = np.flatnonzero(cells == cells.max()).tolist()
        dropped = np.flatnonzero(cells < 0).tolist()
        assert model.info.get("merged", {}).get(col, []) == (merged if len(merged) > 1 else [])
        assert model.info.get("dropped", {}).get(col, []) == dropped


def test_without_compression_nothing_is_merged() -> None:
    model = MST(DOMAINS, compress=False).fit(_session(Budget(rho=1.0)), rho=1.0)
    assert "merged" not in model.info and "dropped" not in model.info


# ------------------------------------------------------------------ the charge


def test_compression_leaves_the_charge_unchanged() -> None:
    on, off = Budget(rho=1.0), Budget(rho=1.0)
    with_c = MST(DOMAINS).fit(_session(on), rho=0.5)
    without = MST(DOMAINS, compress=False).fit(_session(off), rho=0.5)
    assert with_c.info.get("merged") or with_c.info.get("dropped")
    assert on.spent_native == off.spent_native
    assert len(on.ledger) == len(off.ledger) == 1
    assert with_c.info["charge"] == without.info["charge"]
    assert MST(DOMAINS).plan(rho=0.5) == MST(DOMAINS, compress=False).plan(rho=0.5)


def test_compress_must_be_a_bool() -> None:
    from dpkit.errors import PrivacyParameterError

    with pytest.raises(PrivacyParameterError, match="compress"):
        MST(DOMAINS, compress=1)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the model


def _spy_one_way(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Record the noisy 1-way counts of a fit (in column order)."""
    real = mst_module.add_noise
    seen: list[np.ndarray] = []

    def noise(x: np.ndarray, sigma: float, source: Any) -> np.ndarray:
        out: np.ndarray = real(x, sigma, source)
        if x.ndim == 1:
            seen.append(out)
        return out

    monkeypatch.setattr(mst_module, "add_noise", noise)
    return seen


def test_the_model_shares_a_merged_cell_by_the_clipped_noisy_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _spy_one_way(monkeypatch)
    model = MST(DOMAINS).fit(_session(Budget(rho=1.0)), rho=1.0)
    merged = model.info["merged"]["colour"]
    assert merged == [4, 5, 6]  # pink, grey and the missing cell (cyan's count is <= 0)
    assert model.info["dropped"]["colour"] == [3]
    p = model.marginal("colour")
    assert p[3] == 0.0
    assert p.sum() == pytest.approx(1.0)
    w = np.clip(seen[0][merged].astype(np.float64), 0.0, None)
    share = w / w.sum() if w.sum() > 0 else np.full(len(merged), 1.0 / len(merged))
    assert np.allclose(p[merged] / p[merged].sum(), share, rtol=1e-9, atol=1e-12)
    for a, b in model.info["edges"]:
        joint = model.marginal(a, b)
        assert np.allclose(joint.sum(axis=1), model.marginal(a), atol=1e-12)
        assert np.allclose(joint.sum(axis=0), model.marginal(b), atol=1e-12)


def test_a_merged_cell_whose_counts_are_all_negative_is_shared_uniformly() -> None:
    h = np.array([[1, 0], [0, 1], [0, 1], [0, 1]], dtype=np.int64)
    w = mst_module._split(h, np.array([50.0, -1.0, -4.0, 0.0]))
    assert np.allclose(w[:, 1], [0.0, 1 / 3, 1 / 3, 1 / 3])
    w = mst_module._split(h, np.array([50.0, 3.0, -4.0, 1.0]))
    assert np.allclose(w[:, 1], [0.0, 0.75, 0.0, 0.25])
    assert np.allclose(w[:, 0], [1.0, 0.0, 0.0, 0.0])


def test_samples_decode_every_merged_cell_the_model_gives_probability() -> None:
    model = MST(DOMAINS).fit(_session(Budget(rho=1.0)), rho=1.0)
    merged = model.info["merged"]["colour"]
    p = model.marginal("colour")
    some = [c for c in merged if p[c] > 0.0]
    assert some  # a merged cell always keeps its probability somewhere
    n = int(np.ceil(40.0 / min(p[c] for c in some)))  # 40 rows or more expected in each
    syn = model.sample(n, source=RandomSource(seed=1, insecure=True))
    values = [*COLOURS, None]
    drawn = {values[c] for c in merged if p[c] > 0.0}
    got = {None if v is None or v != v else v for v in syn.colour.unique()}
    assert drawn <= got
    assert not ({values[c] for c in merged if p[c] == 0.0} & got)


def test_a_compressed_model_saved_and_loaded_samples_the_same(tmp_path: Any) -> None:
    b = Budget(rho=1.0)
    model = MST(DOMAINS).fit(_session(b), rho=1.0)
    assert model.info["merged"]
    path = tmp_path / "compressed-model.json"
    model.save(path)
    spent = b.spent_native
    again = SyntheticModel.load(path)
    one = model.sample(2_000, source=RandomSource(seed=3, insecure=True))
    two = again.sample(2_000, source=RandomSource(seed=3, insecure=True))
    pd.testing.assert_frame_equal(one, two)
    assert again.info == model.info
    assert b.spent_native == spent and len(b.ledger) == 1


# ------------------------------------------------------------------ per-cell node noise


def test_one_sigma_per_cell_fits_like_one_sigma_for_all() -> None:
    rng = np.random.default_rng(4)
    sizes, edges = [3, 4], [(0, 1)]
    y_nodes = [rng.normal(100, 5, 3), rng.normal(75, 5, 4)]
    y_pairs = [rng.normal(25, 5, (3, 4))]
    one = fit_tree(sizes, edges, y_nodes, 5.0, y_pairs, 7.0)
    each = fit_tree(sizes, edges, y_nodes, [np.full(3, 5.0), np.full(4, 5.0)], y_pairs, 7.0)
    assert one.total == pytest.approx(each.total, rel=1e-12)
    for a, b in zip(one.pairs, each.pairs, strict=True):
        assert np.allclose(a, b, atol=1e-9)


def test_a_noisier_node_cell_weighs_less() -> None:
    # Two measurements of column 0 disagree: the node says (60, 40), the pair's margin
    # (40, 60). The fit sides with the node where its noise is small, with the pair where large.
    sizes, edges = [2, 2], [(0, 1)]
    y_pairs = [np.array([[20.0, 20.0], [30.0, 30.0]])]
    y_nodes = [np.array([60.0, 40.0]), np.array([50.0, 50.0])]
    sure = fit_tree(sizes, edges, y_nodes, [np.array([0.1, 0.1]), np.full(2, 1.0)], y_pairs, 1.0)
    vague = fit_tree(sizes, edges, y_nodes, [np.array([1e3, 1e3]), np.full(2, 1.0)], y_pairs, 1.0)
    assert sure.nodes[0][0] > 0.55
    assert vague.nodes[0][0] < 0.45
