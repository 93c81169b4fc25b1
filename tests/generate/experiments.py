"""The experiment the shadow tests write to ``conf/experiment/``: a JSON Lines file of chats
(``id``, ``messages``, ``answer``) filtered for failed calls, judged for prompt echo, and
``echo_rate`` sliced as each test needs."""

from __future__ import annotations

from pathlib import Path

_ECHO = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /filters: [pipeline_failure]
  - override /judges: [prompt_echo]
  - override /metrics: [echo_rate]
experiment: {name}
source:
  path: {data}
  record_id: id
  fields:
    input: messages
    output: answer
metrics:
  echo_rate:
    slice_by: [{slice_by}]
"""

_LATENCY = """\
  lat:
    plugin: latency
    slice_by: [{slice_by}]
"""


def echo_experiment(name: str, data: Path, slice_by: str, latency: bool = False) -> str:
    """The experiment ``name`` over ``data``, its metrics sliced by ``slice_by`` (with a
    latency metric ``lat`` beside ``echo_rate`` when ``latency``)."""
    text = _ECHO + (_LATENCY if latency else "")
    return text.format(name=name, data=data, slice_by=slice_by)
