"""The turns before a turn: a record that is one turn of a conversation (an agent session's
turn from the ``transcripts`` source: ``metadata.turn_index`` and a ``record_id`` ending in
``:<turn_index>``) kept no message list of its own, so the generate stage replays it with
the conversation as the user saw it: each earlier turn's prompt and the answer it got, then
this turn's prompt. Earlier turns' tool calls and results are not sent (a replay is one
call, not an agent loop); a turn the filters set aside still counts (its prompt was sent).

The turns come from the records of the run as they are read (the source reads a
conversation's turns in order, together), across batches; memory holds the conversations
of the current batch only. An earlier turn the run never saw (cut by ``source.limit``, or in
a batch a resumed run did not read again) is counted as missing in the candidate's
``metadata.generate.history_missing``."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.analysis.metadata import metadata_object

__all__ = ["Conversations"]


def _key(record_id: Any, meta: dict[str, Any]) -> tuple[str, int] | None:
    """``(conversation, turn index)`` of a turn record, else None."""
    index = meta.get("turn_index")
    if isinstance(index, bool) or not isinstance(index, int) or "input_messages" in meta:
        return None
    head, colon, tail = str(record_id).rpartition(":")
    return (head, index) if colon and head and tail == str(index) else None


class Conversations:
    """The turns a run has read so far, by conversation."""

    def __init__(self) -> None:
        self._turns: dict[str, dict[int, tuple[Any, Any]]] = {}

    def replayed(self, table: pa.Table, chosen: pa.Table
                 ) -> tuple[pa.Table, dict[str, dict[str, int]]]:
        """``chosen`` (records of ``table``, a batch) with ``metadata.input_messages`` set on
        each turn record to the conversation up to its prompt; and per such record
        ``{"history_turns": n, "history_missing": k}``."""
        seen: dict[str, dict[int, tuple[Any, Any]]] = {}
        # only a row whose metadata names a turn_index can be a turn: the others (every row
        # of a source that is not a session's turns) are passed over in Arrow, not parsed
        turns_only = table.filter(pc.fill_null(pc.match_substring(
            table.column("metadata"), '"turn_index"'), False))
        cols = turns_only.select(["record_id", "input", "output", "metadata"]).to_pylist()
        for row in cols:
            meta = metadata_object(row["metadata"])
            key = _key(row["record_id"], meta) if meta is not None else None
            if key is not None:
                turns = seen.setdefault(key[0], self._turns.get(key[0], {}))
                turns[key[1]] = (row["input"], row["output"])
        self._turns = seen  # (a conversation not in this batch is over)
        if not seen:
            return chosen, {}
        metadata = chosen.column("metadata").to_pylist()
        notes: dict[str, dict[str, int]] = {}
        for i, (record_id, prompt) in enumerate(zip(chosen.column("record_id").to_pylist(),
                                                   chosen.column("input").to_pylist(),
                                                   strict=True)):
            meta = metadata_object(metadata[i])
            key = _key(record_id, meta) if meta is not None else None
            if key is None or meta is None:
                continue
            turns = seen.get(key[0], {})
            messages: list[dict[str, Any]] = []
            for j in range(key[1]):
                if j not in turns:
                    continue
                before, answer = turns[j]
                if before:
                    messages.append({"role": "user", "content": before})
                if answer:
                    messages.append({"role": "assistant", "content": answer})
            messages.append({"role": "user", "content": prompt or ""})
            meta["input_messages"] = messages
            metadata[i] = orjson.dumps(meta).decode()
            notes[record_id] = {"history_turns": sum(1 for j in range(key[1]) if j in turns),
                                "history_missing": sum(1 for j in range(key[1])
                                                       if j not in turns)}
        index = chosen.schema.get_field_index("metadata")
        return chosen.set_column(index, "metadata", pa.array(metadata, pa.string())), notes
