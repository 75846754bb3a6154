"""The hand-written statistics kept over a library (tools/bench_libraries.py measured them faster)
give the library's answer: the bootstrap intervals are scipy.stats.bootstrap's percentile intervals
from the same seed, and the seeded k-means finds scikit-learn's clusters on separated data."""

from __future__ import annotations

import numpy as np
import pytest

from evals.metrics import bootstrap_means, mean_interval, paired_bootstrap
from langmem_paging.strategies.kmeans import choose_k, kmeans

stats = pytest.importorskip("scipy.stats", reason="scipy is in the `test` extra")

VALUES = np.random.default_rng(7).random(37)
CLUSTERS = np.random.default_rng(8).integers(0, 6, 37).tolist()


def _ratio_of_sums(sums: np.ndarray, counts: np.ndarray, axis: int = -1) -> np.ndarray:
    return sums.sum(axis=axis) / counts.sum(axis=axis)


def test_independent_bootstrap_interval_is_scipys_percentile_interval_for_the_same_seed():
    ours = np.percentile(bootstrap_means(VALUES, n=2000, seed=5), [2.5, 97.5])
    theirs = stats.bootstrap(
        (VALUES,),
        np.mean,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(5),
        vectorized=True,
    ).confidence_interval
    assert ours.tolist() == pytest.approx([theirs.low, theirs.high], abs=1e-12)
    assert mean_interval(VALUES, n=2000, seed=5) == [round(theirs.low, 4), round(theirs.high, 4)]


def test_clustered_bootstrap_is_scipys_paired_bootstrap_over_cluster_sums_and_sizes():
    labels = {c: k for k, c in enumerate(dict.fromkeys(CLUSTERS))}
    index = np.array([labels[c] for c in CLUSTERS])
    sums, sizes = np.bincount(index, weights=VALUES), np.bincount(index).astype(float)
    theirs = stats.bootstrap(
        (sums, sizes),
        _ratio_of_sums,
        paired=True,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(5),
        vectorized=True,
    ).confidence_interval
    ours = np.percentile(bootstrap_means(VALUES, clusters=CLUSTERS, n=2000, seed=5), [2.5, 97.5])
    assert ours.tolist() == pytest.approx([theirs.low, theirs.high], abs=1e-12)
    result = paired_bootstrap(VALUES, np.zeros_like(VALUES), clusters=CLUSTERS, n=2000, seed=5)
    assert result["ci95"] == [round(theirs.low, 4), round(theirs.high, 4)]


@pytest.mark.slow
def test_seeded_kmeans_finds_scikit_learns_clusters_on_separated_themes():
    cluster = pytest.importorskip("sklearn.cluster", reason="scikit-learn is optional: an oracle only")
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    points = np.concatenate([c + rng.normal(size=(15, 64)) for c in rng.normal(size=(5, 64)) * 3])
    ours = kmeans(points, 5, seed=0)
    theirs = cluster.KMeans(5, n_init=4, random_state=0).fit(points)
    assert metrics.adjusted_rand_score(ours.labels, theirs.labels_) == 1.0
    assert ours.inertia == pytest.approx(theirs.inertia_, rel=1e-9)
    chosen = choose_k(points, k_max=10)
    assert chosen.k == 5
    assert chosen.silhouette == pytest.approx(metrics.silhouette_score(points, theirs.labels_), rel=1e-9)
