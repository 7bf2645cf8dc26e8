"""What of the kernel a sandbox job may reach: the system calls it is admitted, and the keyrings.

Namespaces separate files, processes, the network and IPC, but some kernel surfaces cross them:
kernel keyrings belong to a uid (a key one job adds is there for the next job of that uid, and a
session keyring is inherited from the grader), and every system call is kernel code a job can
reach. So each job, as its last steps before running the program:

- clears the user keyrings of its two uids (the harness's and the student's) and joins a fresh,
  empty session keyring of its own (``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``), so nothing of
  the grader's or of an earlier job is within reach;
- loads a seccomp filter (libseccomp, through pyseccomp) that is an **allowlist**, as nsjail's and
  Chromium's are: the filter's default action refuses every call with ENOSYS ("no such call here":
  a program falls back as on an older kernel, as glibc does from ``clone3`` to ``clone``), and only
  the calls in :data:`ALLOWED` and the argument forms of :func:`_with_arguments` are admitted. A
  call this libseccomp cannot name (``listmount``, ``statmount``, ``open_tree_attr`` are newer than
  2.5.4) and any call a later kernel adds is refused by construction, never by being listed;
- (two calls no filter sees, by the kernel's own design: ``uretprobe`` and ``uprobe`` act only when
  called from the kernel's uprobe trampoline, and from anywhere else kill the caller or answer ENXIO;
  :data:`PASSED_BY_THE_KERNEL`, which the probe checks too;)
- kills the job for a call made under another architecture's numbers (the i386 ``int 0x80`` entry,
  x32's numbers): the filter judges x86-64 numbers only, so any other entry is refused whole
  (libseccomp's bad-architecture action, KILL_PROCESS).

The admitted calls were measured, not guessed: ``scripts/measure_syscalls.py`` runs the test corpus
of submissions (right answers in every style and the mutants; the hostile and untrusted catalogues,
graded with the static rule off so that all their code runs), the everyday library uses and the
ways a test's process ends of ``tests/submissions/everyday.py``, and the probe, under strace with
this filter's default opened (``Hardening(syscall_allowlist=False)``, its trace mode), and lists
every call made after a job loaded its filter, with the arguments the rules below look at. Each
entry of :data:`ALLOWED` is a call an honest job, the harness or the probe was measured making, with
what made it. What only hostile code made (``getppid``, ``process_vm_readv``, ``kill`` of pid 1),
what only the probe tries so as to see it refused, and ``execve`` (matplotlib asks ``fc-list`` for
fonts and does without it), ``vfork`` and ``clone3`` (glibc falls back to ``clone``) stay refused.

A few calls are admitted only with some arguments (seccomp sees the registers, never memory):

- ``clone`` without any namespace flag (fork and threads need it; ``clone3`` passes its flags in
  memory, so it is refused whole and glibc falls back to ``clone``);
- ``kill`` and ``tgkill`` only to a pid of 2 or more, or -1 (every process but pid 1): pid 1 (the
  harness), 0 (the caller's process group) and other process groups are refused, so nothing in the job
  signals pid 1 even where uids alone would let it (a rootless sandbox runs both as one uid);
- ``prlimit64`` and ``sched_setaffinity`` only on the caller itself (pid 0: what ``setrlimit`` and
  torch's OpenMP do), never on another process, pid 1 above all;
- ``setresuid``/``setresgid`` only to the student uids, and ``setgroups`` only to no groups: the one
  change of user the harness makes in each child it starts (the child then drops the capabilities
  that allowed it);
- ``fcntl``, ``ioctl`` and ``prctl`` only with the commands a job was measured to use (:data:`FCNTL`,
  :data:`IOCTL`, :data:`PRCTL`): no record locks (``F_SETLK``, ``F_OFD_SETLK``, ...), leases,
  directory notification or signal ownership, which would reach the files and processes of the host
  through the read-only ``/usr`` it shares (``flock``, ``inotify_*`` and ``fanotify_*`` are not
  admitted at all), no device's own ioctls.

No socket family is admitted: a job holds only the descriptors it inherits (the report channel,
its pipes), so ``AF_VSOCK`` (one port space with the host), netlink (the kernel's own interfaces)
and every other family answer EAFNOSUPPORT.

Every other refusal of the filter, a call refused whole or in a form refused (pid 1 aimed at, a
namespace flag, another uid, a command not listed), answers ENOSYS: an answer the kernel never gives
to a call it knows, so the probe (inside/probe.py) tells the filter's refusal from the kernel's own
(EPERM, from the uid pid 1 runs under) and sees each layer hold on its own.
"""
import ctypes
import errno
import os
import time

import pyseccomp

LIBC = ctypes.CDLL(None, use_errno=True)

ALLOWED = {  # system call: what a job was measured making it for (scripts/measure_syscalls.py)
    # files: its program, the Python installation and the modules it imports (read-only), its /tmp
    "read": "files, pipes, the report channel", "write": "(as read)", "pread64": "(reading at an offset: fonts)",
    "open": "opening files (numpy's and torch's C code)", "openat": "(as open: Python's io)", "close": "descriptors",
    "lseek": "file positions", "newfstatat": "file status (every import stats its candidate paths)",
    "getdents64": "listing folders (the import system, os.listdir, /proc)",
    "readlink": "links (the Python prefixes are reached through links)", "getcwd": "the working folder",
    "access": "(os.access: matplotlib's cache folder)", "fstatfs": "(file system sizes: matplotlib's cache)",
    "statfs": "(as fstatfs, by path: os.statvfs, shutil.disk_usage, the probe's /tmp check)",
    "mkdir": "folders in /tmp", "rmdir": "(as mkdir)", "unlink": "files in /tmp", "unlinkat": "(as unlink)",
    "rename": "(files in /tmp: matplotlib's cache)", "link": "(as rename)", "chmod": "(modes of its files in /tmp)",
    "sendfile": "(shutil.copy between files in /tmp)", "dup2": "the child's stdout and stderr on /dev/null",
    "pipe2": "the harness's pipes to each child", "pselect6": "waiting on pipes and pidfds (select)",
    # memory
    "brk": "the heap", "mmap": "memory, and extension modules", "munmap": "(as mmap)",
    "mprotect": "(the dynamic linker; thread stacks' guard pages)", "madvise": "(allocators give memory back)",
    # processes and threads: a fork runs each test, threads run torch's and the student's code
    "wait4": "collecting an ended child", "exit": "a thread ends", "exit_group": "a process ends",
    "getpid": "own process id", "gettid": "(as getpid, of a thread)", "set_robust_list": "thread start-up (glibc)",
    "rseq": "(thread start-up, glibc 2.35+)", "futex": "locks and waits between threads",
    "pidfd_open": "the harness waits on each child through a pidfd", "capset": "a child drops its capabilities",
    "sched_getaffinity": "the CPUs it may use (torch's thread pool)",
    "getuid": "its own uid (the probe reports it)", "uname": "(platform names: torch, numpy)",
    # (the probe's own needs, made by no corpus job: getuid above, and statfs, for the /tmp size check)
    # signals: handlers and masks of its own (pid 1 is out of reach: see kill)
    "rt_sigaction": "signal handlers", "rt_sigprocmask": "signal masks", "rt_sigreturn": "returning from a handler",
    "restart_syscall": "(the kernel restarts a sleep a handler interrupted)",
    # time and randomness (the vDSO answers most clock reads)
    "clock_gettime": "(time.process_time)", "clock_nanosleep": "time.sleep", "getrandom": "os.urandom, hash seeds",
}
FCNTL = {  # fcntl command: what was measured using it
    2: "F_SETFD (close-on-exec: subprocess, matplotlib)", 3: "F_GETFL (io.open)", 1030: "F_DUPFD_CLOEXEC (os.dup)",
}
IOCTL = {  # ioctl request: what was measured using it
    0x5401: "TCGETS (isatty: io.open asks of every file)", 0x5421: "FIONBIO (os.set_blocking)",
    0x5451: "FIOCLEX (os.set_inheritable)",
}
PRCTL = {  # prctl option: what uses it
    4: "PR_SET_DUMPABLE (the harness closes itself; a child opens its own /proc entries)",
    15: "PR_SET_NAME (each process names its part)", 36: "PR_SET_CHILD_SUBREAPER (pid 1 reaps a test's orphans)",
}
NEW_NAMESPACES = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                  0x40000000)  # CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
PASSED_BY_THE_KERNEL = {  # x86-64 calls no seccomp filter sees (Linux 6.12+, kernel/seccomp.c): what they do here
    335: ("uretprobe", "SIGILL"),  # act only when called from the kernel's own uprobe trampoline; from
    336: ("uprobe", "ENXIO"),      # anywhere else uretprobe kills the caller, uprobe answers ENXIO
}
FILTER_SWITCHES = ("syscall_allowlist", "foreign_arch_kills", "socket_families", "pid_1_rule")  # of Hardening
FILTER_WEAKENINGS = ("also_admit", "argument_rules")  # (the mutation test's: calls added whole, rules dropped)
REFUSAL = errno.ENOSYS                # every call not admitted, and every form of one not admitted
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR = 1, 7
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5
LOW_31 = (1 << 31) - 1


def syscall_number(name: str) -> int | None:
    """The number of ``name`` on this machine's architecture (None: libseccomp does not know it)."""
    try:
        number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    except (ValueError, OSError):
        return None
    return number if number >= 0 else None


def syscall_name(number: int) -> str:
    """The name of a call by its number, or "#N" where libseccomp has none."""
    try:
        name = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, number)
    except (ValueError, OSError):
        name = None
    return name.decode() if name else f"#{number}"


def full(strong: dict) -> bool:
    """Are these the sandbox's own switches (every protection on, nothing added), as grading always has?"""
    return all(strong.get(k, True) for k in FILTER_SWITCHES) and not any(strong.get(k) for k in FILTER_WEAKENINGS)


def build_filter(strong: dict, students: tuple[int, int] | None) -> pyseccomp.SyscallFilter:
    """The job's filter (each job loads it, :func:`load`): the allowlist, refusing by default.

    ``strong``: the sandbox's hardening switches (all on, except in the probe's mutation test:
    ``syscall_allowlist`` off admits every call, as the measuring script wants; ``foreign_arch_kills``
    off lets another architecture's calls through; ``socket_families`` off admits every socket;
    ``pid_1_rule`` off admits kill and tgkill to any pid; ``also_admit``: calls admitted whole besides the
    list; ``argument_rules``: calls admitted whole in place of their argument forms).
    ``students``: (first uid, how many) of the student uids the harness may switch its children to."""
    if not strong["syscall_allowlist"]:
        rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    else:
        rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ERRNO(REFUSAL))
        for name in [*ALLOWED, *strong.get("also_admit", ())]:
            if syscall_number(name) is not None:
                rules.add_rule(pyseccomp.ALLOW, name)
        opened = set(strong.get("argument_rules", ())) | (set() if strong.get("pid_1_rule", True) else
                                                          {"kill", "tgkill"})
        for action, name, args in _with_arguments(strong, students):
            if name not in opened:
                rules.add_rule(action, name, *args)
        for name in sorted(opened):
            rules.add_rule(pyseccomp.ALLOW, name)
    rules.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS if strong["foreign_arch_kills"]
                   else pyseccomp.ALLOW)
    rules.set_attr(pyseccomp.Attr.CTL_OPTIMIZE, 2)  # a binary tree over the call numbers, not a list
    return rules


def _with_arguments(strong: dict, students: tuple[int, int] | None):
    """(action, call, argument conditions) of the calls admitted only in some forms; the others refused."""
    allow, eq = pyseccomp.ALLOW, pyseccomp.EQ
    masked = pyseccomp.MASKED_EQ
    every_namespace = sum(NEW_NAMESPACES)
    yield allow, "clone", [pyseccomp.Arg(0, masked, every_namespace, 0)]
    for call in ("kill", "tgkill"):
        for bit in range(1, 31):  # a pid of 2 or more (some bit of 1..30 set, none of 31..63): never pid 1 or 0
            yield allow, call, [pyseccomp.Arg(0, masked, ~LOW_31 & (2**64 - 1) | 1 << bit, 1 << bit)]
        for minus_one in (2**64 - 1, 2**32 - 1):  # -1, as the kernel reads its 32 bits: all but pid 1
            yield allow, call, [pyseccomp.Arg(0, eq, minus_one)]  # (pid 1, 0, other groups: the default)
    yield allow, "prlimit64", [pyseccomp.Arg(0, eq, 0)]
    yield allow, "sched_setaffinity", [pyseccomp.Arg(0, eq, 0)]  # (torch's OpenMP pins its own thread, never another)
    for command in FCNTL:
        yield allow, "fcntl", [pyseccomp.Arg(1, eq, command)]
    for request in IOCTL:
        yield allow, "ioctl", [pyseccomp.Arg(1, masked, 0xFFFFFFFF, request)]
    for option in PRCTL:
        yield allow, "prctl", [pyseccomp.Arg(0, eq, option)]
    if students is not None:
        first, count = students
        assert first % count == 0 and count & (count - 1) == 0, "the student uids must be an aligned block"
        block = ~(count - 1) & (2**64 - 1)
        for call in ("setresuid", "setresgid"):
            yield allow, call, [pyseccomp.Arg(n, masked, block, first) for n in range(3)]
        yield allow, "setgroups", [pyseccomp.Arg(0, eq, 0)]
    for call in ("socket", "socketpair"):  # no family (off: every family, a weakening for the mutation test)
        yield allow if not strong["socket_families"] else pyseccomp.ERRNO(errno.EAFNOSUPPORT), call, []


def ruled_numbers() -> list[int]:
    """The numbers of every call the full filter has a rule for, admitting it in some form or refusing it
    with an errno of its own (socket); the default refuses all the others."""
    names = set(ALLOWED) | {name for _, name, _ in _with_arguments(dict.fromkeys(FILTER_SWITCHES, True), (0, 1))}
    return sorted(n for n in map(syscall_number, names) if n is not None)


def argument_ruled() -> list[str]:
    """The calls the full filter admits only in some forms (the mutation test opens each in turn)."""
    return sorted({name for _, name, _ in _with_arguments(dict.fromkeys(FILTER_SWITCHES, True), (0, 1))}
                  - {"socket", "socketpair"})


def load(rules: pyseccomp.SyscallFilter) -> None:
    """Load the filter into this process (after no_new_privs; inherited by all it starts)."""
    rules.load()


def keyctl(*args: int) -> int:
    """keyctl(2) through syscall(2) (glibc has no wrapper); raises OSError on failure."""
    result = LIBC.syscall(ctypes.c_long(syscall_number("keyctl")), *(ctypes.c_long(a) for a in args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"keyctl: {os.strerror(code)}")
    return result


def clear_user_keyrings(uid: int) -> None:
    """Empty ``uid``'s own keyrings (what an earlier job of that uid, of this run or an older one, left
    there). Called as root: it takes that uid as its real uid for the moment (the user keyrings are
    the real uid's), keeping root as the saved uid to come back."""
    os.setresuid(uid, uid, 0)
    try:
        for keyring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
            keyctl(KEYCTL_CLEAR, keyring)
        _until_collected(uid)
    finally:
        os.setresuid(0, 0, 0)


def join_fresh_session_keyring() -> None:
    """A new, empty session keyring for this process and all it starts (none of the grader's)."""
    keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)


def _until_collected(uid: int, seconds: float = 2.0) -> None:
    """Wait until no key of ``uid`` but its keyrings is listed: an unlinked key lingers, its name in
    /proc/keys, until the kernel's key collector (asynchronous) takes it. Raises if it is still there."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with open("/proc/keys") as fh:
                left = [f for f in map(str.split, fh) if f[5] == str(uid) and f[7] != "keyring"]  # owner, type
        except FileNotFoundError:  # a kernel without keyrings
            return
        if not left:
            return
        if time.monotonic() > deadline:
            raise OSError(f"{len(left)} key(s) of uid {uid} from an earlier job were not collected")
        time.sleep(0.005)
