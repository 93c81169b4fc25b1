"""Many small files against one: ``evalkit run`` over N one-line JSONL files and over the same
N records in one file (prompt_echo judge, a rate metric), fresh processes, alternating, best
of ``--repeat``. Prints each run's wall time and peak memory over its process tree and the
ratios many/one; the target is within 2x on both.

    python bench/bench_many_files.py [--n 5000] [--repeat 3]"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def many_files(n: int = 5000, repeat: int = 3) -> None:
    """Measure and print (``bench/reliability.py`` calls it too)."""
    from tests.reliability.procmem import run_measured

    evalkit = str(Path(sys.executable).with_name("evalkit"))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines = [json.dumps({"id": f"r{i}", "model": f"m{i % 4}", "input": f"say hi {i}",
                             "output": f"say hi {i}" if i % 5 == 0 else f"hello {i}"})
                 for i in range(n)]
        (root / "one.jsonl").write_text("\n".join(lines) + "\n")
        (root / "many").mkdir()
        for i, line in enumerate(lines):
            (root / "many" / f"f{i:05d}.jsonl").write_text(line + "\n")
        best: dict[str, tuple[float, int]] = {}
        for _ in range(repeat):
            for name, path in (("one", "one.jsonl"), ("many", "many/*.jsonl")):
                t0 = time.perf_counter()
                proc, peak = run_measured(
                    [evalkit, "run", "source=jsonl", f"source.path='{path}'",
                     "source.record_id=id", "judges=[prompt_echo]",
                     "+metrics.echo={plugin: rate, judge: prompt_echo}",
                     "runner.summary=false", f"runner.runs_dir=runs_{name}"], cwd=root)
                took = time.perf_counter() - t0
                if proc.returncode:
                    raise SystemExit(proc.stderr[-3000:])
                old = best.get(name)
                best[name] = (min(took, old[0]) if old else took,
                              min(peak, old[1]) if old else peak)
    (t1, m1), (tn, mn) = best["one"], best["many"]
    print(f"many small files: {n:,} one-line JSONL files vs the same records in one "
          f"file, best of {repeat}, load {os.getloadavg()[0]:.1f}")
    print(f"  one file   {t1:6.2f} s  peak {m1 / 2**20:6.0f} MiB")
    print(f"  {n:,} files {tn:6.2f} s  peak {mn / 2**20:6.0f} MiB")
    print(f"  ratio      time {tn / t1:.2f}x  memory {mn / m1:.2f}x  (target within 2x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    many_files(args.n, args.repeat)


if __name__ == "__main__":
    main()
