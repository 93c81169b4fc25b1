"""A runs directory that cannot be written (permission denied, a read-only file system) or
fills up mid-run (a real, small tmpfs): one clear error line, no traceback, no partial file,
and nothing an earlier run wrote is damaged.

Real file systems, not mocks: as root the read-only directory is a tmpfs remounted
read-only, and the full disk a tmpfs of a few hundred KB, both inside a private mount
namespace (``unshare``), so nothing outside the test sees them."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EVALKIT = str(Path(sys.executable).with_name("evalkit"))
ARGS = ["+experiment=quickstart", "runner.summary=false"]


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                            "mount -t tmpfs -o size=64k tmpfs /tmp"],
                           capture_output=True)
    return probe.returncode == 0


def _in_namespace(cwd: Path, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` (sh) in a private mount namespace, in ``cwd``."""
    env = {**os.environ, "EVALKIT_CACHE_DIR": str(cwd / "cache"), "EVALKIT": EVALKIT}
    env.pop("EVALKIT_FAULT", None)
    return subprocess.run(["unshare", "-rm", "sh", "-ec", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_a_runs_directory_without_write_permission_is_one_clear_error(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    if os.geteuid() != 0:
        runs.chmod(0o555)
        try:
            proc = subprocess.run([EVALKIT, "run", *ARGS], cwd=tmp_path, capture_output=True,
                                  text=True, timeout=120)
        finally:
            runs.chmod(0o755)
        line = _one_line(proc.stderr)
        assert "Permission denied" in line
    else:  # root writes through file modes: a read-only mount refuses it too
        if not _can_unshare():
            pytest.skip("needs unshare (a private mount namespace) when run as root")
        proc = _in_namespace(tmp_path, 'mount -t tmpfs -o size=1m tmpfs runs\n'
                                        'mount -o remount,ro runs\n'
                                        '"$EVALKIT" run ' + " ".join(ARGS) + ' || echo "rc=$?"')
        line = _one_line(proc.stderr)
        assert "Read-only file system" in line
        assert "rc=2" in proc.stdout
    assert proc.returncode in (0, 2)
    assert line.startswith("evalkit: error: runner.runs_dir: cannot write ")
    assert "runs" in line and "runner.runs_dir" in line
    assert list(runs.iterdir()) == []


@pytest.mark.skipif(not _can_unshare(), reason="needs unshare and tmpfs")
@pytest.mark.parametrize("free_kb", [4, 24, 48])
def test_a_full_disk_fails_the_run_cleanly_and_damages_nothing(tmp_path, free_kb):
    """A first run fills part of a 1 MB tmpfs; a file takes all but ``free_kb`` of the rest;
    a second run then runs out of space part-way (at a different point for each size)."""
    script = f"""
mkdir -p runs
mount -t tmpfs -o size=1m tmpfs runs
"$EVALKIT" run {' '.join(ARGS)} runner.run_id=first
cd runs && find . -type f | sort | xargs sha256sum > ../before.txt && cd ..
free=$(df -k --output=avail runs | tail -1)
dd if=/dev/zero of=runs/filler bs=1k count=$((free - {free_kb})) 2>/dev/null || true
"$EVALKIT" run {' '.join(ARGS)} runner.run_id=second 2> second.err || echo "rc=$?" > second.rc
rm runs/filler
cd runs && find . -type f | sort | xargs sha256sum > ../after.txt && cd ..
find runs -name '*.tmp-*' > leftovers.txt
cat runs/quickstart/second/manifest.json > second.manifest 2>/dev/null || true
"""
    proc = _in_namespace(tmp_path, script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = (tmp_path / "second.err").read_text()
    line = _one_line(err)
    assert line.startswith("evalkit: error: runner.runs_dir: cannot write ") and \
        "No space left on device" in line, line
    assert (tmp_path / "second.rc").read_text().strip() == "rc=2"
    before = dict(ln.split()[::-1] for ln in (tmp_path / "before.txt").read_text().splitlines())
    after = dict(ln.split()[::-1] for ln in (tmp_path / "after.txt").read_text().splitlines())
    first = {k: v for k, v in before.items() if "/first/" in k}
    assert first and {k: after.get(k) for k in first} == first  # the first run is intact
    assert (tmp_path / "leftovers.txt").read_text() == ""  # no temporary file left
    # the second run is not ok (running, if even its last manifest did not fit; or failed),
    # so no query reads its parts as data
    manifest = (tmp_path / "second.manifest").read_text()
    assert '"status": "ok"' not in manifest
