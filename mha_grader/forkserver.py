"""The sandbox's fork server: one warm interpreter, owned by the grader, that starts every sandbox.

sandbox.py starts it once per grading process (``python -I forkserver.py FD [torch]``, FD a
SOCK_SEQPACKET socket), with numpy and the wire format already imported, and torch too in the
server for the jobs that need it. For each job it receives a request (JSON) with three descriptors (the job's connection,
the report channel's write end, the job's stderr file) and forks:

  manager   (the grader's user, outside)  new mount, PID, network, IPC and UTS namespaces; waits
    init    (pid 1 inside)                builds the file system with mount(2); dies with the manager
      program (the sandbox user)          chroot, no capabilities, no new privileges, limits, then
                                          harness.py runs as __main__, in this warm interpreter

The manager sends the job's exit status on its connection, and kills the job as soon as that
connection closes (the grader gave up on it, or died): init goes, and the kernel takes every
process of the namespace with it. No descriptor but the report channel and stderr enters it.

What skipping a fresh interpreter per notebook costs in isolation: every job's memory starts as a
copy of this process (the same modules, the same address-space layout). This process never reads
a job (no cells, no cases, no secret, no expected value), so a copy of it holds nothing of another
student's; each job still has its own processes, user, namespaces and file system.
"""
import ctypes
import errno
import json
import os
import resource
import runpy
import select
import signal
import socket
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522
LIBC = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None):
    def c(text):
        return text.encode() if text is not None else None
    _check(LIBC.mount(c(source), c(target), c(fstype), ctypes.c_ulong(flags), c(data)), f"mount {target}")


def read_only(source: str, target: str) -> None:
    mount(source, target, flags=MS_BIND)
    mount(None, target, flags=MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


# --- the three processes of a job ------------------------------------------------------------

def manage(request: dict, conn: int, report: int, stderr: int) -> int:
    """The job's manager: namespaces, then init; the exit status goes back on ``conn``."""
    _keep_only(conn, report, stderr)
    null = os.open(os.devnull, os.O_RDWR)
    for fd, target in ((null, 0), (null, 1), (stderr, 2)):
        os.dup2(fd, target)
    os.close(null)
    os.close(stderr)
    uid, gid = os.getuid(), os.getgid()
    rootless = uid != 0
    _check(LIBC.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
                        | (CLONE_NEWUSER if rootless else 0)), "unshare")
    if rootless:  # this user is root inside, and no one else exists there
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    mount(None, "/", flags=MS_REC | MS_PRIVATE)  # nothing mounted from here on reaches the host
    pid = os.fork()
    if pid == 0:  # (its parent is outside its PID namespace: getppid() says 0, it cannot check it)
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.close(conn)
        _exit_with(lambda: init(request, report))
    os.close(report)
    status = _wait_unless_hung_up(pid, conn)
    try:
        os.write(conn, json.dumps({"status": status}).encode())
    except OSError:
        pass  # the grader is gone
    return 0


def init(request: dict, report: int) -> int:
    """pid 1 of the job's namespace: the file system, then the program as the sandbox user."""
    root = request["root"]
    build_root(root, request["job"], request["prefixes"])
    pid = os.fork()
    if pid == 0:
        _exit_with(lambda: program(request, report))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by signal n: 128 + n, as a shell says


def program(request: dict, report: int) -> int:
    give_up_privileges(request["root"], request["uid"], request["limits"])
    path = request["program"]
    sys.argv, sys.path[0] = [path, str(report)], os.path.dirname(path)
    runpy.run_path(path, run_name="__main__")
    return 0


def _exit_with(body) -> None:
    """Run ``body`` in a forked process and end that process with its status, whatever happens."""
    try:
        code = body()
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 1
    except BaseException as err:  # noqa: BLE001 - reported on the job's stderr; it then has no records
        print(f"sandbox: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        code = 70
    os._exit(code if 0 <= code < 256 else 1)


def _keep_only(*fds: int) -> None:
    """Close every descriptor but stdio and ``fds`` (the server's socket above all)."""
    low = 3
    for fd in sorted(fds):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _wait_unless_hung_up(pid: int, conn: int) -> int:
    """Wait for ``pid``; kill it if ``conn`` closes first. Its exit status (negative: a signal)."""
    child = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([child, conn], [], [])
        if child in ready:
            break
        try:
            if os.read(conn, 1):
                continue  # the grader sends nothing; ignore it
        except OSError:
            pass
        os.kill(pid, signal.SIGKILL)
        break
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


# --- the sandbox's file system and the user's rights -------------------------------------------

def build_root(root: str, job: str, prefixes: list[str]) -> None:
    """In ``root``: /usr, /lib, /bin and the Python ``prefixes`` read-only at their own paths, the job
    folder read-only at /job, four devices, /proc of the namespace, a 64 MB /tmp; the rest read-only."""
    mount("sandbox", root, "tmpfs", data="size=16m,mode=755")
    for folder in ("/usr", "/lib", "/lib64", "/bin"):
        if os.path.islink(folder):
            os.symlink(os.readlink(folder), root + folder)
        elif os.path.isdir(folder):
            os.makedirs(root + folder)
            read_only(folder, root + folder)
    for prefix in prefixes:
        os.makedirs(root + prefix, exist_ok=True)
        read_only(prefix, root + prefix)
    os.mkdir(root + "/job")
    read_only(job, root + "/job")
    for folder in ("/dev", "/proc", "/etc", "/tmp"):
        os.makedirs(root + folder, exist_ok=True)
    for device in ("null", "zero", "urandom", "random"):
        open(f"{root}/dev/{device}", "w").close()
        mount(f"/dev/{device}", f"{root}/dev/{device}", flags=MS_BIND)
    if os.path.isfile("/etc/ld.so.cache"):  # the dynamic linker's index of /usr/lib and /lib
        with open("/etc/ld.so.cache", "rb") as src, open(root + "/etc/ld.so.cache", "wb") as dst:
            dst.write(src.read())
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount(None, root, flags=MS_REMOUNT | MS_BIND | MS_RDONLY)
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")


def give_up_privileges(root: str, uid: int | None, limits: dict[str, int]) -> None:
    """The new root, the sandbox user (None: stay, in a user namespace), no capabilities, no new
    privileges, limits."""
    os.chroot(root)
    os.chdir("/")
    for cap in range(64):  # the bounding set, emptied: nothing this process execs can regain one
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break  # past the last capability this kernel knows
            _check(-1, f"dropping capability {cap}")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    _check(LIBC.capset(header, (ctypes.c_uint32 * 6)()), "capset")  # effective, permitted, inheritable: none
    _check(LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


# --- the server ------------------------------------------------------------------------------

def serve(control: socket.socket) -> None:
    """Fork a manager per request until the grader closes ``control``; then wait for the managers."""
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1 << 16, 3)
        if not message:
            break
        request = json.loads(message)
        if len(fds) == 3 and os.fork() == 0:
            _exit_with(lambda: manage(request, *fds))
        for fd in fds:
            os.close(fd)
        while _reap(os.WNOHANG):
            pass
    while _reap(0):
        pass


def _reap(options: int) -> bool:
    """Collect one ended manager; False when none (is left, or has ended yet)."""
    try:
        return os.waitpid(-1, options)[0] != 0
    except ChildProcessError:
        return False


if __name__ == "__main__":
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # (also set by the grader) gone with it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mha_checks"))
    import calling  # noqa: F401, E402 - warm: the harness's `import calling` finds it loaded (numpy with it)
    sys.path.pop(0)
    if sys.argv[2:] == ["torch"]:  # a server of its own: forking a process that holds torch costs 10x more
        import torch
        torch.set_num_threads(1)
    serve(socket.socket(fileno=int(sys.argv[1])))
