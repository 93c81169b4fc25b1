"""Human labels as data: a ``labels`` table kept in the runs directory (``_labels/``) and shown
by ``evalkit query``, imported from files (``evalkit label import``), drawn by design
(``evalkit label sample``), collected on a page that needs no server (``evalkit review``), and
lined up with a run's records for the corrected estimates (:mod:`evalkit.estimation`).
docs/labels.md has the whole story."""

from __future__ import annotations

from evalkit.labels.importing import DESIGNS, ImportResult, import_labels, read_label_file
from evalkit.labels.matching import label_set
from evalkit.labels.store import LABELS, LABELS_DIR, labels_dir, read_labels, read_sample

__all__ = ["DESIGNS", "LABELS", "LABELS_DIR", "ImportResult", "import_labels", "label_set",
           "labels_dir", "read_label_file", "read_labels", "read_sample"]
