"""The grader (`python -m mha_grader`): each submitted notebook run in a sandbox, judged outside it.

Theory of operation. The package has three rooms, one per side of the trust boundary and the wall
between them; each room's __init__ opens with its own theory of operation.

  trusted/  The coordinating process, and on a Dask cluster each worker's grading thread: plans the
            jobs, reads each notebook once as data, decides from its source what may run (the
            ready-made rule, mha_checks), draws the hidden inputs from the course secret, judges what
            a job sends back, records the grades and writes the pages and tables. It holds the
            secret, the hidden inputs and the gradebook, and never runs a line of student code.
  walls/    The sandbox, built and checked from outside by the grader's user (root): the fork
            server that starts every job, its namespaces, file system, uids, limits, cgroup,
            keyrings and system-call filter, one job's run and the reading of its report, and the
            probe's outside half, which checks every claim before any grading.
  inside/   What runs behind the walls: the job's pid 1 (the harness, or the probe), under a uid of
            its own with three capabilities, and the child it forks for each run of the cells, which
            becomes the student (another uid, no capabilities) and alone runs student code.

The processes of one job, and where each runs (as isolate's keeper, proxy and inside):

  grader          trusted/, walls/sandbox.py   the grader's user, outside: makes the job, sends it, reads
                                               its report, judges and records it
  fork server     walls/forkserver.py          the grader's user, outside; numpy (and torch) already loaded
    manager       walls/forkserver.py          outside: the job's cgroup, new namespaces; waits, then sends
                                               back the exit status and the cgroup's usage
      pid 1       walls/forkserver.py, then    inside: builds the file system, gives up every privilege but
                  inside/harness.py            three capabilities, loads the filter, then is the harness
        child     inside/student.py            inside, as the student: the cells, then the calls

The channels, each read as hostile by the side that reads it: the report channel (a socket: pid 1's
records out, one JSON line each, read capped by walls/sandbox.py and checked against their schema
by trusted/frames.py; a call's inputs in, only when pid 1 asks for them, just before that call); the
job's connection (the manager's exit status and usage out; closing it ends the job); inside, a pipe
each way between pid 1 and the child, and the memory they share for the call's arrays (pid 1 keeps
its own copy and sees any change in place itself).

Imports go one way: trusted/ imports walls/, never the reverse; walls/ copies the programs of inside/
into the job's /job and runs them there, and inside/ imports nothing of this package (its modules
import each other, and mha_checks/calling.py, by file). tests/test_layout.py checks it.

Where to look: the limits are walls/sandbox.Limits, applied by walls/cgroups.py (the job's memory,
processes and CPU), walls/forkserver.py (per-process limits), inside/clock.py with inside/harness.py
(each test's and the notebook's time: the student's own, CPU time from the job cgroup's count and time
the code waited by itself, the machine's share left out; a wall-clock backstop, after which
walls/sandbox.py ends the job), and judged and worded by trusted/judging.py (a stop the seconds do
not support is the machine's: never a grade, the notebook is graded again); the round trip of a job is
inside/harness.py (what it sends and asks), walls/sandbox.py (what is read, and answered) and
trusted/frames.py (what is accepted); a job's own cost is spent in walls/forkserver.py (the fork, the
file system, the filter), inside/ (the cells and the calls) and walls/sandbox.py (the job's files,
the report).
"""
