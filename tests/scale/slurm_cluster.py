"""A real one-node Slurm cluster on 127.0.0.1 for the submitit_slurm tests: Debian's
``slurm-wlm`` (slurmctld, slurmd), ``slurmdbd`` with a private MariaDB (submitit asks
``sacct`` whether a job ended: without accounting a job killed before it wrote its result is
never seen to end) and a private ``munged``, all under one temporary directory, on free
ports, as the user running the tests. Nothing under /etc is read or written: the cluster's
commands (``sbatch``, ``squeue``, ``scancel``, ``sacct``) find it through ``SLURM_CONF``.

``.ci/run`` installs the packages; elsewhere :func:`missing` says what is absent."""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd",
           "sbatch", "sacct", "sacctmgr", "scancel", "sinfo")


def _which(name: str) -> str | None:
    """Slurm's daemons live in sbin, often off a user's PATH; ``EVALKIT_SLURM_PATH`` replaces
    the search path (the test that a missing Slurm fails CI points it at an empty folder)."""
    path = os.environ.get("EVALKIT_SLURM_PATH") or os.pathsep.join(
        [os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


def missing() -> str | None:
    """What keeps a cluster from starting here, or None."""
    absent = [d for d in DAEMONS if _which(d) is None]
    if absent:
        return (f"no {', '.join(absent)}: apt-get install slurm-wlm slurmdbd munge "
                "mariadb-server (.ci/run does)")
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SlurmCluster:
    """Start with :meth:`start`, stop with :meth:`stop`; :attr:`env` is what a client of
    the cluster needs (``SLURM_CONF``)."""

    def __init__(self, root: Path | None = None) -> None:
        # short: munge's and MariaDB's socket paths live under it
        self.root = root or Path(tempfile.mkdtemp(prefix="evk-slurm-"))
        self.node = socket.gethostname().split(".")[0]
        self.user = getpass.getuser()
        self.conf = self.root / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self._procs: list[subprocess.Popen] = []

    def _daemon(self, *argv: str) -> subprocess.Popen:
        log = (self.root / "log" / f"{Path(argv[0]).name}.out").open("ab")
        proc = subprocess.Popen([_which(argv[0]) or argv[0], *argv[1:]],
                                env={**os.environ, **self.env}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._procs.append(proc)
        return proc

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p for p in self._procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-1500:]}"
                                 for f in sorted((self.root / "log").glob("*")))
                raise RuntimeError(f"{what} did not start: {logs}")
            time.sleep(0.2)

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([_which(argv[0]) or argv[0], *argv[1:]],
                              env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=60)

    def start(self) -> SlurmCluster:
        r = self.root
        for d in ("log", "state", "spool", "db"):
            (r / d).mkdir(parents=True, exist_ok=True)
        ctld, slurmd, dbd, mysql = _free_ports(4)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        munge_sock = r / "munge.sock"
        self._daemon("munged", "--foreground", "--force", f"--key-file={key}",
                     f"--socket={munge_sock}", f"--pid-file={r / 'munged.pid'}",
                     f"--seed-file={r / 'munge.seed'}", f"--log-file={r / 'log' / 'munged.log'}")
        self._wait("munged", munge_sock.exists)

        init = self._run("mariadb-install-db", "--no-defaults", f"--datadir={r / 'db'}",
                         f"--user={self.user}", "--auth-root-authentication-method=normal",
                         "--skip-test-db")
        if init.returncode != 0:
            raise RuntimeError(f"mariadb-install-db: {init.stdout[-1500:]}{init.stderr[-1500:]}")
        mysql_sock = r / "mysql.sock"
        self._daemon("mariadbd", "--no-defaults", f"--datadir={r / 'db'}", f"--user={self.user}",
                     f"--port={mysql}", "--bind-address=127.0.0.1", f"--socket={mysql_sock}",
                     f"--pid-file={r / 'mysql.pid'}", "--innodb-buffer-pool-size=16M",
                     f"--log-error={r / 'log' / 'mariadb.err'}")
        self._wait("MariaDB", mysql_sock.exists)

        common = (f"AuthType=auth/munge\nAuthInfo=socket={munge_sock}\n"
                  f"SlurmUser={self.user}\n")
        dbd_conf = r / "slurmdbd.conf"  # (slurmdbd reads it beside SLURM_CONF)
        dbd_conf.write_text(
            common + f"DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort={dbd}\n"
            f"LogFile={r / 'log' / 'slurmdbd.log'}\nPidFile={r / 'slurmdbd.pid'}\n"
            f"StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\n"
            f"StoragePort={mysql}\nStorageUser=root\nStorageLoc=slurm_acct_db\n")
        dbd_conf.chmod(0o600)
        self.conf.write_text(
            common + f"ClusterName=evalkit\nSlurmctldHost={self.node}(127.0.0.1)\n"
            f"SlurmctldPort={ctld}\nSlurmdPort={slurmd}\nSlurmdUser={self.user}\n"
            "CredType=cred/munge\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            "SchedulerType=sched/backfill\nSelectType=select/cons_tres\n"
            "SelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n"
            "JobAcctGatherType=jobacct_gather/none\n"
            "AccountingStorageType=accounting_storage/slurmdbd\n"
            f"AccountingStorageHost=127.0.0.1\nAccountingStoragePort={dbd}\n"
            f"AccountingStoragePass={munge_sock}\n"
            # scancel: SIGTERM, then SIGKILL 5 s later (default 30 s)
            "KillWait=5\n"
            f"StateSaveLocation={r / 'state'}\nSlurmdSpoolDir={r / 'spool'}\n"
            f"SlurmctldPidFile={r / 'slurmctld.pid'}\nSlurmdPidFile={r / 'slurmd.pid'}\n"
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}\n"
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}\n"
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n"
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=FORCE:4\n")
        self._daemon("slurmdbd", "-D")
        self._wait("slurmdbd", lambda: self._run("sacctmgr", "-n", "list", "cluster")
                   .returncode == 0)
        self._run("sacctmgr", "-i", "add", "cluster", "evalkit")
        self._daemon("slurmctld", "-D", "-i")
        self._daemon("slurmd", "-D", "-N", self.node)
        self._wait("slurmctld and slurmd", lambda: " idle" in self._run(
            "sinfo", "-h", "-o", " %T").stdout)
        return self

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # (and what slurmd started)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
