"""Comparing runs: the maths behind ``evalkit compare``, a run's baseline gate, the report's
comparison page and the Python API, in one place.

- :func:`compare_runs`: per metric row the change B − A over the shared records, a paired
  interval, a test (McNemar's exact test for a rate paired per record, the paired bootstrap
  otherwise) corrected across rows, the smallest detectable change, the records that
  flipped, the judge/system split and the gates (:class:`Comparison`).
- :func:`rank_runs` / :func:`rank_sweep` (:mod:`evalkit.comparison.ranking`): runs on the
  same records (a sweep's candidates) best first by one metric, each with its interval and
  the range of ranks the pairwise paired tests allow, corrected over the pairs.
- The pieces, for other callers: :func:`mcnemar_exact`, :func:`bootstrap_test`,
  :func:`adjust` (Holm, Benjamini–Hochberg), :func:`mde_normal`, :func:`mde_mcnemar`,
  :class:`GateConfig` and :func:`parse_gate`.

What each test means and when to use it: docs/trust.md."""

from evalkit.comparison._compare import GATE_EXIT, MAX_BOOT, N_BOOT, Comparison, compare_runs
from evalkit.comparison._gate import GateConfig, gate_test, parse_gate
from evalkit.comparison._multiplicity import CORRECTIONS, adjust, lone_alpha
from evalkit.comparison._significance import (
    BootstrapTest,
    bootstrap_test,
    mcnemar_exact,
    mde_mcnemar,
    mde_normal,
)
from evalkit.comparison.ranking import Ranking, rank_runs, rank_sweep

__all__ = [
    "CORRECTIONS", "GATE_EXIT", "MAX_BOOT", "N_BOOT", "BootstrapTest", "Comparison",
    "GateConfig", "Ranking", "adjust", "bootstrap_test", "compare_runs", "gate_test",
    "lone_alpha", "mcnemar_exact", "mde_mcnemar", "mde_normal", "parse_gate", "rank_runs",
    "rank_sweep",
]
