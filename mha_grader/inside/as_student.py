"""The first step of every process of a job that will run student code: become the student.

A job's pid 1 (the harness, or the probe) runs as a uid of its own, the harness uid, keeping only
the capabilities to change its children's user and to end them (CAP_SETUID, CAP_SETGID, CAP_KILL).
Each child it forks to run student code calls :func:`become` before anything else: the student
uid and gid, no groups, no capabilities at all. From then on the kernel's own permission rules keep
pid 1 out of the child's reach, whatever the child runs: a signal (``kill``, ``tgkill``,
``rt_sigqueueinfo``, SIGIO through ``F_SETOWN``), ``prlimit``, ``ptrace``, ``process_vm_writev``,
/proc/1/mem and /proc/1/oom_score_adj all need the target's uid (or a capability), and pid 1's is
another. (The seccomp filter refuses signals and prlimit aimed at pid 1 as well: walls/kernel.py.)

Copied into the job folder next to the harness and imported there; ``student`` comes from job.json
(None: no change, as in the unsafe mode or a rootless sandbox, whose user namespace maps one uid).
"""
import ctypes
import os

PR_SET_DUMPABLE = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
OOM_FIRST = 1000  # the kernel's OOM killer takes this process before any other of the job, pid 1 last


def become(student: int | None) -> None:
    """This process (a child of pid 1, before any student code) as the student: its uid and gid, no
    groups, no capabilities, and the first the OOM killer takes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc entries its own (pid 1 stays closed)
    with open("/proc/self/oom_score_adj", "w") as fh:  # (raising it needs no privilege)
        fh.write(str(OOM_FIRST))
    if student is None:
        return
    os.setgroups([])
    os.setresgid(student, student, student)
    os.setresuid(student, student, student)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:  # effective, permitted, inheritable: none
        code = ctypes.get_errno()
        raise OSError(code, f"dropping the capabilities: {os.strerror(code)}")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # (a change of uid made it undumpable again)
