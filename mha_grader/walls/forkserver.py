"""The sandbox's fork server: one warm interpreter, owned by the grader, that starts every sandbox and
builds, for each job, what walls/__init__.py claims of it.

servers.py starts this server once per grading process (``python -I forkserver.py FD [torch]``, FD a
SOCK_SEQPACKET socket), with numpy and the wire format already imported, and torch too in the
server for the jobs that need it; the programs a job runs are compiled once here, and the heap is
put on 2 MB pages (huge_pages), which makes each fork below cheaper. For each job it receives a
request (JSON) with three descriptors (the job's connection, the report channel's write end, the
job's stderr file) and forks:

  manager   (the grader's user, outside)  the job's cgroup; new namespaces; waits, reads the usage
    init    (pid 1 inside)                joins the cgroup and opens its CPU count (the harness
                                          measures each test's CPU time with it); builds the file
                                          system with mount(2);
                                          then, as the program: no signal handler, its uids'
                                          keyrings cleared, chroot, pid 1's uid with three
                                          capabilities, no new privileges, limits, a fresh keyring,
                                          the seccomp filter, and inside/harness.py runs as
                                          __main__, in this warm interpreter
      child (inside/student.py)           forked by the harness for each run of the cells: the
                                          student's uid, no capabilities

The program is pid 1 itself (one fork fewer per job): its orphans come back to it, and when it ends
the kernel ends every other process of the namespace. Nothing the student's code runs reaches it:
it handles no signal (the kernel gives a namespace's pid 1 only the signals it handles; Python's
SIGINT handler is removed), and it runs under another uid, so the kernel refuses the student's
processes every signal, prlimit, trace, /proc/1/mem and OOM score of it; the filter refuses signals
and prlimit aimed at pid 1 too. Every way its child can end is a verdict for one test
(inside/harness.py).

The manager sends the job's exit status and its cgroup's usage on its connection, and kills the job
as soon as that connection closes (the grader gave up on it, or died): init goes, and the kernel
takes every process of the namespace with it. No descriptor but the report channel and stderr
enters it.

What skipping a fresh interpreter per notebook costs in isolation: every job's memory starts as a
copy of this process (the same modules, the same address-space layout; the file names of the
modules it loaded, as in numpy.__file__ or /proc/self/maps, name the Python installation's real
folders). This process never reads a job (no cells, no cases, no secret, no expected value), so a
copy of it holds nothing of another student's; each job still has its own processes, users,
namespaces, cgroup and file system. Nor does it hold a listing of any folder of the checkout (the
course folder, under `make grade`): it keeps on sys.path only the Python installation's folders (a
venv's .pth file adds the checkout), loads its own modules by file, and empties the import system's
folder caches and the source lines it read before the first job.
"""
import ctypes
import errno
import gc
import importlib.util
import json
import linecache
import os
import resource
import runpy
import select
import signal
import socket
import sys
import time
import types

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_SET_KEEPCAPS, PR_SET_NAME, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 8, 15, 24, 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7
HARNESS_CAPABILITIES = 1 << CAP_KILL | 1 << CAP_SETGID | 1 << CAP_SETUID
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_COLLAPSE, HUGE = 25, 2 << 20
TITLE = b"mha-sandbox"  # what /proc/<pid>/cmdline says of the job's pid 1 (not this script's path)
RULES = None  # the seccomp filter (kernel.build_filter), built once when the server starts
STUDENTS = None  # (first uid, how many): the student uids (from the grader, as the server starts)
PROGRAMS: dict[str, tuple[bytes, object]] = {}  # compiled_programs(), once when the server starts
INSIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "inside")  # the programs a job runs


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


def read_only_overlay(source: str, empty: str, target: str) -> None:
    """``source`` at ``target``, read-only, as an overlay given its layers by descriptor: mountinfo
    shows "lowerdir=/proc/self/fd/N:...", never ``source``'s path (a bind mount would show it)."""
    layers = [os.open(path, os.O_RDONLY | os.O_DIRECTORY) for path in (source, empty)]
    try:
        mount("python", target, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
              "lowerdir=" + ":".join(f"/proc/self/fd/{fd}" for fd in layers))
    finally:
        for fd in layers:
            os.close(fd)


# --- the three processes of a job ------------------------------------------------------------

def manage(request: dict, conn: int, report: int, stderr: int) -> int:
    """The job's manager: namespaces, then init; the exit status goes back on ``conn``."""
    _keep_only(conn, report, stderr)
    LIBC.prctl(PR_SET_NAME, b"mha-manager", 0, 0, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd, target in ((null, 0), (null, 1), (stderr, 2)):
        os.dup2(fd, target)
    os.close(null)
    os.close(stderr)
    start = time.perf_counter()
    group = cgroups.JobGroup(f"mha-job-{os.getpid()}", cgroups.Caps(**request["caps"])).create() \
        if request["hardening"]["cgroup"] else None
    created = time.perf_counter()
    try:
        status = _contain(request, conn, report, group)
    finally:
        usage, ended = (group.usage() if group else {}), time.perf_counter()
        if group:
            usage["removed"] = group.remove()
            usage["overhead_s"] = created - start + time.perf_counter() - ended  # creating and removing it
    try:
        os.write(conn, json.dumps({"status": status, "usage": usage}).encode())
    except OSError:
        pass  # the grader is gone
    return 0


def _contain(request: dict, conn: int, report: int, group) -> int:
    """New namespaces, then init in them; the job's exit status once init has ended."""
    strong = request["hardening"]
    uid, gid = os.getuid(), os.getgid()
    rootless = uid != 0
    _check(LIBC.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | (CLONE_NEWNET if strong["net_namespace"] else 0)
                        | (CLONE_NEWIPC if strong["ipc_namespace"] else 0) | (CLONE_NEWUSER if rootless else 0)),
           "unshare")
    if rootless:  # this user is root inside, and no one else exists there
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    mount(None, "/", flags=MS_REC | MS_PRIVATE)  # nothing mounted from here on reaches the host
    pid = os.fork()
    if pid == 0:  # (its parent is outside its PID namespace: getppid() says 0, it cannot check it)
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.close(conn)
        _exit_with(lambda: init(request, report, group))
    os.close(report)
    code = _wait_unless_hung_up(pid, conn)
    return code if code >= 0 else 128 - code  # killed by signal n: 128 + n, as a shell says


def init(request: dict, report: int, group) -> int:
    """pid 1 of the job's namespace: the cgroup, the file system, then the program as the sandbox user."""
    LIBC.prctl(PR_SET_NAME, b"mha-init", 0, 0, 0)
    count = None
    if group:
        group.join()
        if request.get("cpu_count"):  # opened while it may: the program reads the job's CPU time through it
            count = os.open(group.cpu_file(), os.O_RDONLY | os.O_CLOEXEC)
        _check(LIBC.unshare(CLONE_NEWCGROUP), "unshare(cgroup)")  # its /proc/self/cgroup says "/"
    if request["hardening"]["hide_host_paths"]:
        _blank_command_line()
    build_root(request["root"], request["job"], request["prefixes"], request["hardening"])
    return program(request, report, count)


def program(request: dict, report: int, count: int | None = None) -> int:
    """The program, as pid 1 of the sandbox: ``report`` its report channel, ``count`` (if any) the job
    cgroup's CPU count, open for reading (its arguments: /job/PROGRAM REPORT [COUNT])."""
    strong = request["hardening"]
    if strong["cgroup"]:
        _oom_score_adj(500)  # at the memory cap the kernel kills in the job, not the manager (raising: no privilege)
    for number in signal.valid_signals():  # pid 1 takes no signal from inside its namespace but those it handles:
        if callable(signal.getsignal(number)):  # so it handles none (Python's SIGINT handler goes)
            signal.signal(number, signal.SIG_DFL)
    harness, student = request["uid"], request["student"]
    if strong["keyring"] and harness is not None:  # (rootless: one uid, in a user namespace of its own)
        for uid in sorted({harness, student} - {None}):
            kernel.clear_user_keyrings(uid)
    give_up_privileges(request["root"], harness, student, request["limits"])
    if strong["keyring"]:
        kernel.join_fresh_session_keyring()
    if strong["seccomp"]:  # the last step: the filter refuses chroot, mount, keyctl, ...
        kernel.load(RULES if kernel.full(strong) else kernel.build_filter(strong, STUDENTS))
    path = request["program"]
    sys.argv = [path, str(report), *([] if count is None else [str(count)])]
    sys.path.insert(0, os.path.dirname(path))
    with open(path, "rb") as fh:
        source = fh.read()
    compiled = PROGRAMS.get(path)
    if compiled is None or compiled[0] != source:
        runpy.run_path(path, run_name="__main__")
        return 0
    main = types.ModuleType("__main__")  # as runpy.run_path does, without compiling the program again
    main.__file__ = path
    sys.modules["__main__"] = main
    exec(compiled[1], main.__dict__)
    return 0


def compiled_programs() -> dict[str, tuple[bytes, object]]:
    """{path in the sandbox: (source, code)} of the programs a job runs, compiled once here; a job whose
    program's source is not this one's (a changed file) compiles its own."""
    found = {}
    for name in ("harness.py", "probe.py"):
        with open(os.path.join(INSIDE, name), "rb") as fh:
            source = fh.read()
        found[f"/job/{name}"] = (source, compile(source, f"/job/{name}", "exec"))
    return found


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


def _oom_score_adj(value: int) -> None:
    with open("/proc/self/oom_score_adj", "w") as fh:
        fh.write(str(value))


def _blank_command_line() -> None:
    """Overwrite this process's command line in place (as setproctitle does): /proc/1/cmdline
    inside would otherwise show the interpreter's and this script's host paths."""
    with open("/proc/self/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49 of stat(5))
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, TITLE, min(len(TITLE), end - start - 1))


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

def build_root(root: str, job: str, prefixes: list, strong: dict) -> None:
    """In ``root``: /usr, /lib and /bin read-only at their own paths, each Python prefix read-only at
    /python/N (its host paths, as sys.path names them, are links to it), the job's files in a
    read-only tmpfs at /job, four devices, /proc of the namespace, a 64 MB /tmp; the rest read-only.
    ``prefixes``: [[real folder, [the paths it is known by]], ...]. ``strong``: the hardening switches
    (all on, except in the probe's mutation test)."""
    mount("sandbox", root, "tmpfs", data="size=16m,mode=755")
    for folder in ("/usr", "/lib", "/lib64", "/bin"):
        if os.path.islink(folder):
            os.symlink(os.readlink(folder), root + folder)
        elif os.path.isdir(folder):
            os.makedirs(root + folder)
            read_only(folder, root + folder)
    in_tmp = _mount_prefixes(root, prefixes, strong["hide_host_paths"])
    _mount_job(root, job, strong)
    for folder in ("/dev", "/proc", "/etc", "/tmp"):
        os.makedirs(root + folder, exist_ok=True)
    for device in ("null", "zero", "urandom", "random"):
        open(f"{root}/dev/{device}", "w").close()
        mount(f"/dev/{device}", f"{root}/dev/{device}", flags=MS_BIND)
    if os.path.isfile("/etc/ld.so.cache"):  # the dynamic linker's index of /usr/lib and /lib
        with open("/etc/ld.so.cache", "rb") as src, open(root + "/etc/ld.so.cache", "wb") as dst:
            dst.write(src.read())
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if strong["readonly_root"]:
        mount(None, root, flags=MS_REMOUNT | MS_BIND | MS_RDONLY)
    else:  # (a weakening for the probe's mutation test: a root the job can write)
        os.chmod(root, 0o1777)
    tmp_size = ",size=64m" if strong["tmp_size"] else ""  # (else: a weakening for the mutation test)
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" + tmp_size)
    for path, target in in_tmp:  # a prefix known by a path under /tmp: its link lives in the job's /tmp
        _link(root, path, target)


def _mount_prefixes(root: str, prefixes: list, hide: bool) -> list:
    """Mount the Python prefixes and link the paths they are known by; the links that belong under
    /tmp are returned (made once /tmp is mounted)."""
    later = []
    os.makedirs(root + "/python/.empty")
    for n, (real, paths) in enumerate(prefixes):
        target = f"/python/{n}"
        os.mkdir(root + target)
        if hide:
            read_only_overlay(real, root + "/python/.empty", root + target)
        else:  # (a weakening for the mutation test: a bind mount, whose source mountinfo shows)
            read_only(real, root + target)
        for path in paths:
            if path == "/tmp" or path.startswith("/tmp/"):
                later.append((path, target))
            else:
                _link(root, path, target)
    return later


def _link(root: str, path: str, target: str) -> None:
    """A link at ``path`` inside ``root`` to ``target``; the folders above it made (root's, 755)."""
    os.makedirs(os.path.dirname(root + path), mode=0o755, exist_ok=True)
    if not os.path.lexists(root + path):
        os.symlink(target, root + path)


def _mount_job(root: str, job: str, strong: dict) -> None:
    """The job's files at /job: copied into a tmpfs of their own (mountinfo shows no host folder),
    then read-only."""
    os.mkdir(root + "/job")
    if not strong["hide_host_paths"]:  # (a weakening for the mutation test: the host folder bound)
        read_only(job, root + "/job")
        return
    names = sorted(os.listdir(job))
    size = sum(os.path.getsize(os.path.join(job, n)) for n in names) + (1 << 20)
    mode = "755" if strong["readonly_job"] else "1777"  # (else: a weakening for the mutation test)
    mount("job", root + "/job", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")
    for name in names:
        with open(os.path.join(job, name), "rb") as src, open(f"{root}/job/{name}", "wb") as dst:
            dst.write(src.read())
        os.chmod(f"{root}/job/{name}", 0o644)
    if strong["readonly_job"]:
        mount(None, root + "/job", flags=MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def give_up_privileges(root: str, uid: int | None, student: int | None, limits: dict[str, int]) -> None:
    """The new root, the harness user (None: stay, in a user namespace), no new privileges, limits, and
    no capabilities but, where the student has a uid of its own, the three that let pid 1 make each
    child the student and end what its tests leave running (as_student.py)."""
    os.chroot(root)
    os.chdir("/")
    for cap in range(64):  # the bounding set, emptied: nothing this process execs can regain one
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break  # past the last capability this kernel knows
            _check(-1, f"dropping capability {cap}")
    kept = HARNESS_CAPABILITIES if uid is not None and student is not None else 0
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        _check(LIBC.prctl(PR_SET_KEEPCAPS, 1 if kept else 0, 0, 0, 0), "keeping capabilities")
        os.setresuid(uid, uid, uid)
        _check(LIBC.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0), "keeping capabilities")
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    sets = (ctypes.c_uint32 * 6)(kept, kept, 0, 0, 0, 0)  # effective, permitted, inheritable (low, then high words)
    _check(LIBC.capset(header, sets), "capset")
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


def huge_pages() -> None:
    """Back this server's writable anonymous memory (its heap: torch's and Python's objects) with 2 MB
    pages where the kernel can (MADV_COLLAPSE, Linux 6.1+), so that each of a job's forks copies one
    page-table entry per 2 MB instead of 512 and its exit unmaps as few (measured on Linux 6.18: a fork
    and exit of the torch server, 9.7 ms of CPU before, 4.0 after; an exercise-5 job, 120 ms before, 80
    after). Pages a job writes are still copied 4 kB at a time. A kernel without it leaves the pages
    as they are."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if "w" not in fields[1] or (len(fields) > 5 and fields[5] != "[heap]"):
                continue  # (mapped files and stacks stay as they are)
            low, high = (int(x, 16) for x in fields[0].split("-"))
            start, end = -(-low // HUGE) * HUGE, high // HUGE * HUGE  # the whole 2 MB pages inside
            if end > start:
                LIBC.madvise(start, end - start, MADV_COLLAPSE)


def _reap(options: int) -> bool:
    """Collect one ended manager; False when none (is left, or has ended yet)."""
    try:
        return os.waitpid(-1, options)[0] != 0
    except ChildProcessError:
        return False


def load_module(name: str, path: str) -> types.ModuleType:
    """The module at ``path``, imported as ``name`` from that file alone: no folder is searched or
    listed (a listing would stay in sys.path_importer_cache, in every job's memory)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def forget_host_folders(prefixes: list[str]) -> None:
    """Keep on sys.path only the Python installation's folders (a venv's .pth may add the checkout, which
    is the course folder under `make grade`), and drop every other folder's listing the import system
    cached, and every source line read: a job starts as a copy of this process. (The installation's
    listings stay: a job that imports a module this process has not loaded lists no folder again.)"""
    def inside(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == q or real.startswith(q + os.sep) for q in prefixes)
    sys.path[:] = [p for p in sys.path if inside(p)]
    for folder in [f for f in sys.path_importer_cache if not inside(f)]:
        del sys.path_importer_cache[folder]
    linecache.clearcache()


if __name__ == "__main__":
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # (also set by the grader) gone with it
    HERE = os.path.dirname(os.path.abspath(__file__))
    PREFIXES = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    forget_host_folders(PREFIXES)  # before any import can list a folder of the checkout
    CHECKOUT = os.path.dirname(os.path.dirname(HERE))
    load_module("calling", os.path.join(CHECKOUT, "mha_checks", "calling.py"))  # warm: the job's
    load_module("as_student", os.path.join(INSIDE, "as_student.py"))  # `import calling` finds it loaded (numpy too)
    load_module("student", os.path.join(INSIDE, "student.py"))  # (it imports those two)
    load_module("clock", os.path.join(INSIDE, "clock.py"))  # (the harness's measure of a test's time)
    import numpy.random  # noqa: F401, E402 - what the harness seeds in each job: loaded once here (16 ms a job else)
    import random  # noqa: F401, E402
    cgroups = load_module("mha_grader.walls.cgroups", os.path.join(HERE, "cgroups.py"))
    kernel = load_module("mha_grader.walls.kernel", os.path.join(HERE, "kernel.py"))
    STUDENTS = (int(sys.argv[2]), int(sys.argv[3]))
    RULES = kernel.build_filter(dict.fromkeys(kernel.FILTER_SWITCHES, True), STUDENTS)
    PROGRAMS = compiled_programs()
    if sys.argv[4:] == ["torch"]:  # a server of its own: forking a process that holds torch costs 10x more
        import torch
        torch.set_num_threads(1)
    forget_host_folders(PREFIXES)  # (what the imports above cached)
    gc.collect()
    gc.freeze()  # a job's collections never walk (and so never copy the pages of) what every job inherits
    huge_pages()
    LIBC.prctl(PR_SET_NAME, b"mha-server", 0, 0, 0)  # (each process names its part, for ps, top and perf)
    serve(socket.socket(fileno=int(sys.argv[1])))
