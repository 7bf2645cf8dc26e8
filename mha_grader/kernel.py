"""What of the kernel a sandbox job may not reach: the system calls it is refused, and the keyrings.

Namespaces separate files, processes, the network and IPC, but some kernel surfaces cross them:
kernel keyrings belong to a uid (a key one job adds is there for the next job of that uid, and a
session keyring is inherited from the grader), and some system calls are large attack surfaces
that no grading job needs. So each job, as its last step before running the program:

- clears its uid's user keyrings and joins a fresh, empty session keyring of its own
  (``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``), so nothing of the grader's or of an earlier job is
  within reach;
- loads a seccomp filter built with libseccomp (through pyseccomp) that refuses the calls in
  :data:`CLOSED` with ENOSYS ("no such call here": a program falls back as on an older kernel, and
  the probe can tell the filter's refusal from the kernel's own EPERM).

The filter allows by default and refuses a list of system calls. That is complete in the sense the
rules ask for: the set of system calls is finite and known, every call that reaches a kernel
surface a grading job never needs is named here with the reason, and new kernel calls of that kind
(``clone3``'s flags, the new mount API) are named too. ``clone`` itself stays (fork needs it) but
not with a namespace flag; ``clone3`` passes its flags in memory, which a filter cannot read, so it
is refused whole (glibc then falls back to ``clone``).
"""
import ctypes
import errno
import os
import time

import pyseccomp

LIBC = ctypes.CDLL(None, use_errno=True)

CLOSED = {  # system call: why a grading job never needs it
    "keyctl": "kernel keyrings are per uid, not per namespace: a key would pass from job to job",
    "add_key": "(keyrings, as keyctl)",
    "request_key": "(keyrings, as keyctl)",
    "io_uring_setup": "io_uring runs requests in kernel threads a filter never sees; a large attack surface",
    "io_uring_enter": "(io_uring)",
    "io_uring_register": "(io_uring)",
    "userfaultfd": "lets a process pause the kernel mid-copy: the classic tool to win kernel races",
    "bpf": "loads programs into the kernel",
    "perf_event_open": "performance counters: side channels and a large kernel surface",
    "ptrace": "would let a test's process read or change the harness that holds the report channel",
    "process_vm_readv": "(reading another process's memory, as ptrace)",
    "process_vm_writev": "(changing another process's memory, as ptrace)",
    "pidfd_getfd": "(taking another process's descriptors, as ptrace)",
    "kcmp": "(comparing other processes' kernel objects, as ptrace)",
    "unshare": "new namespaces (a user namespace gives root inside it, and the kernel code behind it)",
    "setns": "(entering namespaces, as unshare)",
    "clone3": "passes its flags in memory a filter cannot read (so namespaces); glibc falls back to clone",
    "mount": "the file system is built before the job starts; nothing is mounted after",
    "umount2": "(mounts, as mount)",
    "pivot_root": "(mounts, as mount)",
    "chroot": "(mounts, as mount)",
    "open_tree": "(the new mount API, as mount)",
    "move_mount": "(the new mount API, as mount)",
    "fsopen": "(the new mount API, as mount)",
    "fsconfig": "(the new mount API, as mount)",
    "fsmount": "(the new mount API, as mount)",
    "fspick": "(the new mount API, as mount)",
    "mount_setattr": "(the new mount API, as mount)",
    "open_by_handle_at": "opens files by handle, around the mount tree (a known container escape)",
    "name_to_handle_at": "(file handles, as open_by_handle_at)",
    "init_module": "loads kernel modules",
    "finit_module": "(kernel modules)",
    "delete_module": "(kernel modules)",
    "kexec_load": "replaces the running kernel",
    "kexec_file_load": "(kexec)",
    "reboot": "the machine is not the job's",
    "swapon": "(the machine's swap)",
    "swapoff": "(the machine's swap)",
    "acct": "(the machine's process accounting)",
    "quotactl": "(the machine's disk quotas)",
    "syslog": "the kernel log tells about the host",
    "fanotify_init": "watches the file systems' activity",
    "lookup_dcookie": "(kernel profiling)",
    "iopl": "raw I/O ports",
    "ioperm": "(raw I/O ports)",
}
NEW_NAMESPACES = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                  0x40000000)  # CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
REFUSAL = errno.ENOSYS
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR = 1, 7
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5


def syscall_number(name: str) -> int | None:
    """The number of ``name`` on this machine's architecture (None: it has no such call)."""
    try:
        number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    except (ValueError, OSError):
        return None
    return number if number >= 0 else None


def build_filter() -> pyseccomp.SyscallFilter:
    """The job's filter, built once in the fork server; each job loads it (:func:`load`)."""
    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    refuse = pyseccomp.ERRNO(REFUSAL)
    for name in CLOSED:
        if syscall_number(name) is not None:
            rules.add_rule(refuse, name)
    for flag in NEW_NAMESPACES:  # clone(flags, ...) with any namespace flag set
        rules.add_rule(refuse, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    return rules


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


def private_keyring(clear_user_keyrings: bool) -> None:
    """Join a fresh session keyring; with ``clear_user_keyrings``, empty this uid's own keyrings
    first (a sandbox uid's: what an earlier job, of this run or an older one, left there)."""
    if clear_user_keyrings:
        for keyring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
            keyctl(KEYCTL_CLEAR, keyring)
        _until_collected(os.getuid())
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
