"""Inside the sandbox: the programs a job runs, behind the walls that walls/ builds.

Theory of operation. A job is two kinds of process, and only one of them ever runs student code:

  pid 1 (harness.py)  the job's first process, under a uid of its own (62592 + slot) that keeps only
                      CAP_SETUID, CAP_SETGID and CAP_KILL: it holds the report channel, asks for
                      each case's inputs just before the call and keeps a private copy of them, lays
                      the arrays out in memory it shares with the child, and watches the child. It
                      never runs student code, handles no signal and is not dumpable, so no process
                      of the job can signal it, limit it, or read or write its memory (/proc/PID/mem,
                      process_vm_writev). When it ends, the kernel ends every other process of the job.
                      (A rootless sandbox has one uid for both: walls/__init__.py.)
  child (student.py)  forked by pid 1 for each run of the cells: closes the report channel, becomes
                      the student (as_student.py: uid 62464 + slot, no groups, no capabilities, the
                      first the OOM killer takes), then runs the cells and the calls, answering each
                      on a pipe of its own. A test whose child crashes, hangs, runs out of memory or
                      exits costs that test alone; the next test gets a new child.

pid 1 measures each test's time with clock.py: the student's own (CPU time from the job cgroup's count,
time its code waited by itself), the machine's share (run-queue waits, pauses) left out; the seconds go
out with each test's status, and the judge decides from them whose a stop was.

A probe job (probe.py, run by walls/probing.py) has the same two kinds: its pid 1 counts the signals
that land on it, and the child it forks becomes the student and checks every claim the walls make
from there.

Nothing here decides a grade or sees an expected value: every record leaves on the report channel as
data, and the trusted side checks it (trusted/frames.py) before it judges. These files are copied into
the job's /job, each job's own read-only folder, with mha_checks/calling.py, and import one another by
file name (``import student``, ``import calling``), never as this package: the job has nothing else of
the checkout. The fork server (walls/forkserver.py) loads them once and compiles harness.py and
probe.py, so a job imports nothing new; ``--unsafe-no-sandbox`` runs the same programs with no walls.
"""
