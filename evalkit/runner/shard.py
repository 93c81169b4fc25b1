"""``source.shard=i/n``: the records of any source whose id hashes to shard ``i`` of ``n``, so
``-m source.shard=0/4,1/4,2/4,3/4`` fans one evaluation out over a launcher and every record
lands in exactly one shard, whatever the batch sizes or the order the source reads in. The
hash is of ``record_id`` (blake2b, the same on every machine and Python); a reject belongs to
the shard its location hashes to, imported scores to the shard of their record. The shards of
one logical run are put together by ``evalkit merge``.

A source that can cut its input itself says so (:meth:`evalkit.plugin.Source.shard`, e.g.
Langfuse by time window, so each shard fetches only its part); the runner then keeps all it
yields (:func:`runner_cut`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pyarrow as pa

from evalkit.errors import ConfigError
from evalkit.plugin import ImportedScores, Reject, Source, SourceItem

__all__ = ["parse_shard", "runner_cut", "shard_of", "sharded"]


def parse_shard(value: object) -> tuple[int, int] | None:
    """``"i/n"`` as ``(i, n)``; a one-line error naming the fix for anything else."""
    if value is None:
        return None
    text = str(value).strip()
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise ConfigError(f"source.shard: {value!r} is not a shard; set source.shard=i/n with "
                          "0 <= i < n (e.g. source.shard=0/4), or null for all records")
    return i, n


def runner_cut(source: Source, shard: tuple[int, int] | None) -> tuple[int, int] | None:
    """The shard the runner still has to cut from what ``source`` yields: None when there is
    no shard, or the source reads only its own (it may refuse the shard: ConfigError)."""
    if shard is None or source.shard(*shard):
        return None
    return shard


def shard_of(key: str | None, n: int) -> int:
    digest = hashlib.blake2b((key or "").encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def _mask(ids: pa.Array | pa.ChunkedArray, i: int, n: int) -> pa.Array:
    return pa.array([shard_of(k, n) == i for k in ids.to_pylist()], pa.bool_())


def sharded(items: Iterator[SourceItem], shard: tuple[int, int] | None) -> Iterator[SourceItem]:
    """What a source yields, cut to shard ``shard`` (everything when None)."""
    if shard is None:
        yield from items
        return
    i, n = shard
    for item in items:
        if isinstance(item, Reject):
            if shard_of(str(item.location), n) == i:
                yield item
        elif isinstance(item, ImportedScores):
            table = item.table
            kept = table.filter(_mask(table.column("record_id"), i, n))
            if kept.num_rows:
                yield ImportedScores(kept)
        else:
            kept = item.filter(_mask(item.column("record_id"), i, n))
            if kept.num_rows:
                yield kept
