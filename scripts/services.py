"""Throw-away services on loopback for tests and benchmarks: a PostgreSQL server, a Dask scheduler
and its workers. Everything started here is stopped here, by process id, also when starting fails.

    python scripts/services.py start DIR [--postgres] [--dask-workers N] [--worker-preload MODULE]  # prints DIR/services.json
    python scripts/services.py stop DIR                                    # stops all, removes the data
    python scripts/services.py run DIR [--postgres] [--dask-workers N] -- COMMAND ...
        (start, run COMMAND with MHA_GRADER_DB_URL / DASK_SCHEDULER_ADDRESS set, then stop)

PostgreSQL: Debian's postgresql-15 (installed with apt-get when missing, as root); `initdb` refuses
root, so as root the server runs as the `postgres` user. Its data folder is a fresh temporary
folder, it listens on 127.0.0.1 only (a free port), password authentication, one database
`gradebook`; fsync is off (nothing here is worth keeping). The gradebook URL is
postgresql+psycopg://grader:PASSWORD@127.0.0.1:PORT/gradebook.

Dask: `dask scheduler --host 127.0.0.1` and N `dask worker` processes (1 thread each, each under its
nanny) on loopback, started from the repository root with it on PYTHONPATH, each with `--preload
mha_grader.trusted.cluster` (the scheduler unpickles the grading tasks, the workers run them: both import
the grader as they start), and any `--worker-preload` (a module or a .py file the workers load too: a
test's change to the grader). The scheduler drops a worker silent for the grader's WORKER_TTL
(distributed.scheduler.worker-ttl). Run this file with the venv's Python (the `dask` command is taken
from the same folder).

Each service runs in its own session; `stop` signals that whole process group and waits until no
process of it is left (services.json keeps the ids).
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER, PG_DB = "grader", "gradebook"


# --- starting ---------------------------------------------------------------------------------

def start(folder: Path, postgres: bool, dask_workers: int, worker_preload: list[str] = ()) -> dict:
    """Start the services; on any failure stop what was started and raise."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {"processes": [], "folders": []}
    try:
        if postgres:
            state["db_url"] = _postgres(folder, state)
        if dask_workers:
            state["scheduler"] = _dask(folder, state, dask_workers, list(worker_preload))
    except BaseException:
        _save(folder, state)
        stop(folder)
        raise
    _save(folder, state)
    return state


def _spawn(state: dict, name: str, cmd: list[str], log: Path, stop_signal: str = "SIGTERM",
           **kwargs) -> subprocess.Popen:
    """Start ``cmd`` in a session of its own; its id is saved (beside ``log``) before anything else can fail."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, **kwargs)
    state["processes"].append({"name": name, "pid": proc.pid, "signal": stop_signal})
    _save(log.parent, state)
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ready, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not start (exit status {proc.poll()}):\n{tail}")
        time.sleep(0.2)


def _postgres(folder: Path, state: dict) -> str:
    _install_postgres()
    data_root = Path(tempfile.mkdtemp(prefix="mha-postgres-"))  # 0700, outside any private folder
    state["folders"].append(str(data_root))
    as_user = _unprivileged(data_root)
    password = secrets.token_hex(16)
    (data_root / "pwfile").write_text(password + "\n")
    _chown(data_root)
    log = folder / "postgres.log"
    initdb = subprocess.run([*as_user, str(PG_BIN / "initdb"), "-D", str(data_root / "data"), "-U", PG_USER,
                             "--auth=scram-sha-256", f"--pwfile={data_root / 'pwfile'}", "-E", "UTF8",
                             "--locale=C", "--no-sync"], capture_output=True, text=True, cwd=data_root)
    if initdb.returncode:
        raise RuntimeError(f"initdb failed:\n{initdb.stdout}{initdb.stderr}")
    port = _free_port()
    proc = _spawn(state, "postgres", [*as_user, str(PG_BIN / "postgres"), "-D", str(data_root / "data"),
                                      "-c", "listen_addresses=127.0.0.1", "-c", f"port={port}",
                                      "-c", f"unix_socket_directories={data_root}", "-c", "fsync=off"],
                  log, stop_signal="SIGINT", cwd=data_root)  # SIGINT: PostgreSQL's "fast shutdown"
    env = {**os.environ, "PGPASSWORD": password}
    where = ["-h", "127.0.0.1", "-p", str(port), "-U", PG_USER]
    _wait("PostgreSQL", lambda: subprocess.run([str(PG_BIN / "pg_isready"), *where, "-d", "postgres"],
                                               capture_output=True).returncode == 0, proc, log)
    made = subprocess.run([str(PG_BIN / "createdb"), *where, PG_DB], env=env, capture_output=True, text=True)
    if made.returncode:
        raise RuntimeError(f"createdb failed: {made.stderr}")
    return f"postgresql+psycopg://{PG_USER}:{password}@127.0.0.1:{port}/{PG_DB}"


def _install_postgres() -> None:
    if (PG_BIN / "initdb").exists():
        return
    if os.geteuid() != 0:
        raise RuntimeError("PostgreSQL 15 is not installed: `sudo apt-get install postgresql-15`")
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql-15"], check=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def _unprivileged(data_root: Path) -> list[str]:
    """The command prefix that runs PostgreSQL's programs as an unprivileged user."""
    if os.geteuid() != 0:
        return []
    import pwd
    user = pwd.getpwnam("postgres")  # created by the Debian package
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]


def _chown(data_root: Path) -> None:
    if os.geteuid() == 0:
        import pwd
        user = pwd.getpwnam("postgres")
        for path in (data_root, *data_root.iterdir()):
            os.chown(path, user.pw_uid, user.pw_gid)


def _dask(folder: Path, state: dict, workers: int, preload: list[str]) -> str:
    from mha_grader.trusted.cluster import WORKER_TTL
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": WORKER_TTL}
    log = folder / "dask-scheduler.log"
    scheduler = _spawn(state, "dask-scheduler", [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1",
                                                  "--port", str(port), "--no-dashboard",
                                                  "--preload", "mha_grader.trusted.cluster"],
                       log, cwd=REPO, env=env)
    _wait("the Dask scheduler", lambda: _listening(port), scheduler, log)
    for n in range(workers):
        _spawn(state, f"dask-worker-{n}", [str(BIN / "dask"), "worker", address, "--host", "127.0.0.1",
                                           "--nthreads", "1", "--no-dashboard", "--name", f"worker-{n}",
                                           "--preload", "mha_grader.trusted.cluster",
                                           *(arg for module in preload for arg in ("--preload", module))],
               folder / f"dask-worker-{n}.log", cwd=REPO, env=env)
    from distributed import Client
    with Client(address, timeout="30s") as client:
        client.wait_for_workers(workers, timeout=120)
        # One no-op task per worker: the services are ready when a fresh cluster's first task is paid.
        client.gather([client.submit(len, [], pure=False, workers=[w]) for w in client.scheduler_info()["workers"]])
    return address


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# --- stopping ---------------------------------------------------------------------------------

def stop(folder: Path, timeout: float = 30) -> list[str]:
    """Stop every recorded service with its own signal (then SIGKILL), newest first, and wait until
    none of its processes is left; remove the data folders. Returns the services that had to be killed."""
    state = _load(folder)
    killed = []
    for proc in reversed(state.get("processes", [])):
        pids = processes(proc["pid"])  # the service and every process it started (PostgreSQL's have own groups)
        _signal(proc["pid"], getattr(signal, proc["signal"]))
        deadline = time.monotonic() + timeout
        while _running(pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _running(pids):
            killed.append(proc["name"])
            for pid in _running(pids):
                _signal(pid, signal.SIGKILL)
            while _running(pids):
                time.sleep(0.1)
    for path in state.get("folders", []):
        shutil.rmtree(path, ignore_errors=True)
    return killed


def _signal(pid: int, sig: int) -> None:
    """``sig`` to the process group of ``pid`` (each service leads its own), else to ``pid`` alone."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _table() -> dict[int, tuple[str, int, int]]:
    """{pid: (state, parent pid, process group)} of every process on the machine."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # state ppid pgrp ...
            table[int(entry.name)] = (fields[0], int(fields[1]), int(fields[2]))
    return table


def processes(pid: int) -> set[int]:
    """``pid``, its descendants and the members of its process group that are running (not zombies)."""
    table = _table()
    found = {p for p, (_, _, group) in table.items() if group == pid} | ({pid} if pid in table else set())
    grew = True
    while grew:
        more = {p for p, (_, parent, _) in table.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return {p for p in found if table[p][0] != "Z"}


def _running(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running; zombie children of this process are collected on the way."""
    table = _table()
    for pid in pids:
        if pid in table and table[pid][0] == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
    return {p for p in pids if p in table and table[p][0] != "Z"}


def _save(folder: Path, state: dict) -> None:
    (folder / "services.json").write_text(json.dumps(state, indent=1))


def _load(folder: Path) -> dict:
    try:
        return json.loads((folder / "services.json").read_text())
    except FileNotFoundError:
        return {}


# --- command line -----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop", "run"])
    parser.add_argument("folder", type=Path, help="where the state, the logs and services.json go")
    parser.add_argument("--postgres", action="store_true", help="a PostgreSQL server with a gradebook database")
    parser.add_argument("--dask-workers", type=int, default=0, help="a Dask scheduler with this many workers")
    parser.add_argument("--worker-preload", action="append", default=[],
                        help="a module or .py file each worker loads too (repeatable)")
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:len(argv) - len(command) - ("--" in argv)])
    if args.action == "stop":
        killed = stop(args.folder)
        print("stopped" + (f" (killed: {', '.join(killed)})" if killed else ""))
        return 0
    state = start(args.folder, args.postgres, args.dask_workers, args.worker_preload)
    if args.action == "start":
        print(json.dumps(state, indent=1))
        return 0
    env = {**os.environ, **({"MHA_GRADER_DB_URL": state["db_url"]} if "db_url" in state else {}),
           **({"DASK_SCHEDULER_ADDRESS": state["scheduler"]} if "scheduler" in state else {})}
    try:
        return subprocess.run(command or ["true"], env=env).returncode
    finally:
        stop(args.folder)


if __name__ == "__main__":
    sys.exit(main())
