"""Helpers for the filter tests: records built from a few dicts."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from evalkit.results.schemas import RECORDS, conform


def make_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """A records batch (full schema) from partial rows; ids default to r0, r1, …"""
    rows = [{"record_id": f"r{i}", **r} for i, r in enumerate(rows)]
    table = conform(rows, RECORDS)
    return table.combine_chunks().to_batches()[0] if rows else \
        pa.RecordBatch.from_pylist([], schema=RECORDS)


@pytest.fixture
def batch():
    return make_batch
