"""``sample``: keeps a deterministic fraction of records. Whether a record is kept depends
only on its ``record_id`` and the seed (a BLAKE2b hash), so the same records are kept
whatever the batch size, the input order or the run."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.plugin import Filter

__all__ = ["sample_position", "SampleConfig", "SampleFilter"]

_SCALE = float(1 << 64)


@dataclass(frozen=True)
class SampleConfig:
    fraction: float = "???"  # type: ignore[assignment]  # share of records to keep, in (0, 1]
    seed: int = 0  # another seed keeps another sample

    def validate(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"fraction: {self.fraction} is not within (0, 1]")


def sample_position(record_ids: list[str | None], seed: int) -> np.ndarray:
    """A number in [0, 1) per record id, uniform over ids and stable across runs (NaN for a
    null id)."""
    salt = f"{seed}:".encode()
    out = np.empty(len(record_ids), dtype=float)
    for i, rid in enumerate(record_ids):
        if rid is None:
            out[i] = np.nan
            continue
        digest = hashlib.blake2b(salt + rid.encode(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "big") / _SCALE
    return out


class SampleFilter(Filter):
    """Marks every record outside the sample. A record with a null id is never sampled."""

    Config = SampleConfig

    def __init__(self, name: str, config: SampleConfig, ctx: object) -> None:
        self.config = config
        self.reason = f"not in the {config.fraction:.4g} sample (seed {config.seed})"

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """The reason for each record left out of the sample, null for those kept."""
        pos = sample_position(batch.column("record_id").to_pylist(), self.config.seed)
        with np.errstate(invalid="ignore"):
            keep = pa.array(pos < self.config.fraction)
        return pc.if_else(keep, pa.scalar(None, pa.string()), self.reason)
