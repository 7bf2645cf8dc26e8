"""The sandbox's walls: what builds a job's sandbox from outside, runs the job, and checks the walls.

Theory of operation. A grading job is a student's notebook cells and the calls the tests make; it
runs in a sandbox whose every property below is a claim the README makes and `make probe` checks
(inside/probe.py from inside, probing.py from outside), one check per claim, before any grading starts:

- its own mount, PID, network, IPC, UTS and cgroup namespaces: no other process, no interface but
  `lo` (the host's loopback listener unreachable), no shared memory with the host;
- a file system of its own: a read-only root holding /usr, /lib, /bin, the Python installation
  (read-only overlays at /python/N) and the job (a read-only tmpfs at /job), four devices, /proc of
  its namespace, and a 64 MB /tmp, its only writable place; nothing of the course, the home folders,
  the secret or the gradebook. No host path shows through: pid 1's command line is blanked, the
  mounts come from neutral sources (/proc/self/mountinfo names no host folder), /proc/self/cgroup
  shows "/";
- two unprivileged uids of its own per concurrent job (distinct, so that one job's process limit
  cannot starve another): the student's (62464 + slot), under which every process that runs student
  code runs, with no capabilities, and pid 1's (62592 + slot), which keeps
  only the three capabilities it needs to make each child it forks the student and to end what a test
  left running (inside/as_student.py); no new privileges; limits per process on address space,
  processes and file size;
- a cgroup of its own (cgroups.py) capping the memory of all its processes together, their number,
  and their CPU (one core); its usage comes back with the exit status, and the group is removed;
- a fresh, empty session keyring and its uids' keyrings cleared, and a seccomp filter that is an
  allowlist: it admits the calls a job was measured to need (kernel.py says which, and why), refuses
  every other call, named or not, and kills the job for a call under another architecture's numbers;
- a lifetime tied to the grader: when the job ends, its time is up, or the grader dies, pid 1 of its
  namespace goes and the kernel takes every process of the job with it.

Run as an ordinary user instead of root, a job runs in a new user namespace as that user (who owns
nothing the sandbox can see), pid 1 too (the filter alone keeps pid 1 out of reach then), and the job
cgroups need a delegated cgroup v2 subtree.

Who does what, all outside the sandbox but for a job's pid 1 before it runs its program:

  sandbox.py     in the grading process: one job, from the grader's side. Its limits and hardening,
                 a slot (the uids), the job's folder, the request to the fork server, the report
                 channel read back (capped) with each call's inputs handed over only when asked;
                 the jobs running now, ended when grading stops.
  servers.py     in the grading process: the fork servers' handles (one for numpy jobs, one with torch).
  forkserver.py  the fork server (a warm interpreter) and, for each job, the manager (its cgroup, the
                 new namespaces, its exit status) and pid 1 until it becomes the program: the file
                 system, the uids and capabilities, the limits, the keyring, then the filter.
  cgroups.py     the job's control group: caps, usage read back, removal (cgroup v2, or v1 as on
                 hybrid hosts).
  kernel.py      the system calls a job is admitted (the seccomp allowlist, with what made each call)
                 and its keyrings.
  probing.py     `make probe` from outside: two probe jobs at once, then the claims only the outside
                 sees (the cgroup's caps and usage, distinct uids, no other process with a sandbox uid).
"""
