"""Build the sandbox's file system, give up every privilege, then run the grading program in it.

    python -I enter.py ROOT UID JOB MEMORY PROCESSES FILE_SIZE PREFIX... -- PROGRAM ARG...

sandbox.py starts this under `unshare`, in fresh mount, PID, network, IPC and UTS namespaces, as
root or as the root of a new user namespace. ROOT is an empty mount point, UID the user to become
("keep": stay, in a user namespace), JOB the job folder, then the limits (bytes of address space,
processes of the user, bytes of one file), each PREFIX a folder of the Python installation.
Inside, only these are visible, read-only, and /tmp is a small tmpfs.

This process stays as the namespace's first process, with its own rights: when it ends (the job
is over, or unshare was killed and took it along), the kernel kills everything left in the
namespace. The program runs in a forked child, in this same interpreter (no second interpreter
start), once that child is in the new root with no capabilities, no new privileges and its limits.
Mounts are system calls here, not one `mount` process each: the sandbox costs milliseconds.
"""
import ctypes
import errno
import os
import resource
import runpy
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
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


def read_only(root: str, path: str) -> None:
    """``path`` at the same place under ``root``, read-only."""
    os.makedirs(root + path, exist_ok=True)
    mount(path, root + path, flags=MS_BIND)
    mount(None, root + path, flags=MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def build_root(root: str, job: str, prefixes: list[str]) -> None:
    mount("sandbox", root, "tmpfs", data="size=16m,mode=755")
    for folder in ("/usr", "/lib", "/lib64", "/bin"):
        if os.path.islink(folder):
            os.symlink(os.readlink(folder), root + folder)
        elif os.path.isdir(folder):
            read_only(root, folder)
    for prefix in prefixes:
        read_only(root, prefix)
    os.mkdir(root + "/job")
    mount(job, root + "/job", flags=MS_BIND)
    mount(None, root + "/job", flags=MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
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


def give_up_privileges(root: str, uid: str, limits: dict[str, int]) -> None:
    """In the child: the new root, the sandbox user, no capabilities, no new privileges, limits."""
    os.chroot(root)
    os.chdir("/")
    for cap in range(64):  # the bounding set, emptied: nothing this process execs can regain one
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break  # past the last capability this kernel knows
            _check(-1, f"dropping capability {cap}")
    if uid != "keep":
        os.setgroups([])
        os.setresgid(int(uid), int(uid), int(uid))
        os.setresuid(int(uid), int(uid), int(uid))
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    _check(LIBC.capset(header, (ctypes.c_uint32 * 6)()), "capset")  # effective, permitted, inheritable: none
    _check(LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def main(argv: list[str]) -> int:
    split = argv.index("--")
    (root, uid, job, memory, processes, file_size, *prefixes), program = argv[:split], argv[split + 1:]
    limits = {"RLIMIT_AS": int(memory), "RLIMIT_NPROC": int(processes), "RLIMIT_FSIZE": int(file_size),
              "RLIMIT_CORE": 0}
    build_root(root, job, prefixes)
    pid = os.fork()
    if pid == 0:
        try:
            give_up_privileges(root, uid, limits)
            sys.argv, sys.path[0] = program, os.path.dirname(program[0])
            runpy.run_path(program[0], run_name="__main__")
        except SystemExit as end:
            os._exit(end.code if isinstance(end.code, int) else 1)
        except BaseException as err:  # noqa: BLE001 - reported on stderr, the job then has no records
            print(f"sandbox: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            os._exit(70)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
