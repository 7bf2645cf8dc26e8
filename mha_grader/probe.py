"""Run inside the sandbox by `sandbox.probe()`: report what student code could reach, as JSON.

Each line: {"check": name, "ok": bool, "detail": str}. The grader refuses to grade unless every
check is ok (or the instructor passes --unsafe-no-sandbox).
"""
import json
import os
import resource
import socket
import sys

OUT = int(sys.argv[1])
JOB = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.json")))


def report(check: str, ok: bool, detail: str = "") -> None:
    os.write(OUT, (json.dumps({"check": check, "ok": bool(ok), "detail": detail}) + "\n").encode())


def cannot(action) -> tuple[bool, str]:
    try:
        action()
    except OSError as err:
        return True, err.strerror or type(err).__name__
    return False, "it worked"


report("unprivileged user", os.getuid() != 0 or JOB["rootless"], f"uid {os.getuid()}")
pids = [p for p in os.listdir("/proc") if p.isdigit()]
report("own process namespace", len(pids) <= 4, f"{len(pids)} processes visible")
for path in JOB["private"]:
    ok, why = cannot(lambda p=path: os.listdir(p) if os.path.isdir(p) else open(p).read(1) or
                     (_ for _ in ()).throw(FileNotFoundError(2, "empty")))
    report(f"cannot read {path}", ok or not os.path.exists(path), why)
for path in JOB["readonly"]:
    ok, why = cannot(lambda p=path: open(os.path.join(p, ".sandbox-probe"), "w").close())
    report(f"cannot write {path}", ok, why)
ok, why = cannot(lambda: socket.create_connection(("127.0.0.1", JOB["port"]), timeout=2).close())
report("no network (not even the host's loopback)", ok, why)
interfaces = sorted(name for _, name in socket.if_nameindex())
report("no network interface but loopback", interfaces == ["lo"], f"interfaces: {', '.join(interfaces)}")
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
held = {k: status.get(k, "?").strip() for k in ("CapEff", "CapPrm", "CapBnd")}
report("no capabilities", all(v.strip("0") == "" for v in held.values()), str(held))
report("no new privileges", status.get("NoNewPrivs", "").strip() == "1", f"NoNewPrivs {status.get('NoNewPrivs')}")
report("memory limit", resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY)
report("process limit", resource.getrlimit(resource.RLIMIT_NPROC)[0] != resource.RLIM_INFINITY)
report("scratch folder writable", cannot(lambda: open("/tmp/.probe", "w").write("x"))[0] is False)
