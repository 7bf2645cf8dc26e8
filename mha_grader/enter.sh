#!/bin/sh
# Build the sandbox's file system and start the program in it, as an unprivileged user.
#   enter.sh ROOT UID JOB PREFIX... -- COMMAND...
# Runs inside fresh mount, PID, network, IPC and UTS namespaces (sandbox.py starts it under
# `unshare`), as root or as the root of a new user namespace. ROOT is an empty mount point, UID
# the user to become ("keep": stay, in a user namespace), JOB the job folder, each PREFIX a
# folder of the Python installation. Only these are visible, read-only; /tmp is a small tmpfs.
set -eu
root=$1 uid=$2 job=$3
shift 3
mount -t tmpfs -o size=16m,mode=755 sandbox "$root"
ro() {  # ro SOURCE: the same path inside, read-only
    mkdir -p "$root$1"
    mount --bind "$1" "$root$1"
    mount -o remount,bind,ro,nosuid,nodev "$root$1"
}
for dir in /usr /lib /lib64 /bin; do
    if [ -L "$dir" ]; then ln -s "$(readlink "$dir")" "$root$dir"; elif [ -d "$dir" ]; then ro "$dir"; fi
done
while [ "$1" != "--" ]; do ro "$1"; shift; done
shift
mkdir -p "$root/job" && mount --bind "$job" "$root/job" && mount -o remount,bind,ro,nosuid,nodev "$root/job"
mkdir -p "$root/dev" "$root/proc" "$root/etc" "$root/tmp"
for dev in null zero urandom random; do
    touch "$root/dev/$dev" && mount --bind "/dev/$dev" "$root/dev/$dev"
done
[ -f /etc/ld.so.cache ] && cp /etc/ld.so.cache "$root/etc/"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -o remount,bind,ro "$root"
mount -t tmpfs -o size=64m,mode=1777,nosuid,nodev tmpfs "$root/tmp"
# This shell stays as the namespace's first process, with its own rights: when it ends (the job is
# over, or unshare was killed and took it along), the kernel kills everything left in the namespace.
if [ "$uid" = keep ]; then
    chroot "$root" setpriv --no-new-privs --inh-caps=-all --bounding-set=-all -- "$@"
else
    chroot "$root" setpriv --reuid "$uid" --regid "$uid" --clear-groups --no-new-privs \
        --inh-caps=-all --bounding-set=-all -- "$@"
fi
