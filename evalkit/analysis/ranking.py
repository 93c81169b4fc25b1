"""Rank-aware retrieval statistics. Shared by the ``context_precision`` metric and the
``context_relevance`` judge."""

from __future__ import annotations

import numpy as np

__all__ = ["average_precision"]


def average_precision(rel: np.ndarray) -> float:
    """Σ_k precision@k·rel_k / Σ_k rel_k over the ranked 0/1 labels (0 when none is
    relevant)."""
    if not rel.sum():
        return 0.0
    precision_at = np.cumsum(rel) / np.arange(1, len(rel) + 1)
    return float((precision_at * rel).sum() / rel.sum())
