import signal

from .trusted.cli import main

code = main()
for stop in (signal.SIGINT, signal.SIGTERM):  # the run is over: the exit handlers (fork servers) finish quietly
    signal.signal(stop, signal.SIG_IGN)
raise SystemExit(code)
