"""Everyday library uses an honest notebook may make beyond the catalogues' answers (threads, time,
randomness, files in /tmp, plotting, NumPy and torch at length), and the ways a test's process can
end: the measured needs of a job that mha_grader/walls/kernel.py's allowlist admits
(scripts/measure_syscalls.py runs them under strace; tests/test_sandbox.py runs them under the filter).

Each is the source of one cell defining ``probe``: EVERYDAY's take no argument and return plain
values; ENDINGS's ``probe(n)`` ends its process in the n-th way.
"""
EVERYDAY = {  # library uses an honest notebook may make, beyond the corpus's answers: cell source
    "threads and time": """
        import threading, time, datetime, os, sys
        def probe():
            out = []
            workers = [threading.Thread(target=lambda: out.append(time.perf_counter())) for _ in range(3)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            time.sleep(0.01)
            return [len(out), datetime.datetime.now().year > 2000, os.cpu_count() >= 1, time.process_time() >= 0]
    """,
    "randomness": """
        import random, os, secrets, uuid
        import numpy as np
        def probe():
            rng = np.random.default_rng()
            return [random.random() < 1, len(os.urandom(8)), len(secrets.token_hex(4)), len(str(uuid.uuid4())),
                    float(rng.normal()) == float(rng.normal()) or True, float(np.random.rand()) < 1]
    """,
    "files in /tmp": """
        import tempfile, os, json, pathlib, shutil
        import numpy as np
        def probe():
            with tempfile.TemporaryDirectory() as folder:
                path = pathlib.Path(folder) / "a.npy"
                np.save(path, np.arange(6.0))
                (pathlib.Path(folder) / "b.json").write_text(json.dumps({"a": 1}))
                shutil.copy(path, pathlib.Path(folder) / "c.npy")
                listed = sorted(os.listdir(folder))
                back = np.load(pathlib.Path(folder) / "c.npy")
            with tempfile.NamedTemporaryFile("w+") as fh:
                fh.write("x")
                fh.flush()
            return [listed, float(back.sum())]
    """,
    "plotting": """
        import io
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        def probe():
            fig, ax = plt.subplots()
            ax.imshow(np.eye(4))
            ax.set_title("weights")
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png")
            plt.close(fig)
            return buffer.getvalue()[1:4] == b"PNG"
    """,
    "a signal handler of its own": """
        import os, signal
        def probe():
            caught = []
            previous = signal.signal(signal.SIGUSR1, lambda number, frame: caught.append(number))
            os.kill(os.getpid(), signal.SIGUSR1)
            signal.signal(signal.SIGUSR1, previous)
            return caught == [signal.SIGUSR1]
    """,
    "numpy at length": """
        import math, functools, itertools, collections, dataclasses, typing
        import numpy as np
        def probe():
            a = np.random.default_rng(0).normal(size=(64, 48)).astype(np.float32)
            u, s, vt = np.linalg.svd(a, full_matrices=False)
            q = np.einsum("ij,kj->ik", a, a) / math.sqrt(48)
            e = np.exp(q - q.max(-1, keepdims=True))
            return [float(s.sum()), float((e / e.sum(-1, keepdims=True)).sum()), float(np.fft.rfft(a[0]).real.sum()),
                    np.linalg.solve(a[:48] @ a[:48].T + np.eye(48, dtype=np.float32), a[:48, 0]).shape[0]]
    """,
}
# The harness's own needs: each way a test's process can end (its tests call probe(0), probe(1), ...).
ENDINGS = """
        import os, signal, sys, threading, time
        def probe(n):
            if n == 0:
                os._exit(3)
            if n == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            if n == 2:
                if os.fork() == 0:
                    time.sleep(100)
                return "left a process running"
            if n == 3:
                threading.Thread(target=lambda: (time.sleep(0.05), os._exit(0))).start()
                return "a thread will end it"
            if n == 4:
                return "x" * (7 << 20)
            if n == 5:
                sys.exit(2)
            if n == 6:
                raise type("Odd", (Exception,), {"__str__": lambda self: 1 / 0})()
            if n == 7:
                os.abort()
            while True:
                pass
"""
EVERYDAY_TORCH = {
    "torch at length": """
        import math
        import torch
        import torch.nn.functional as F
        def probe():
            torch.manual_seed(0)
            x = torch.randn(2, 5, 16)
            layer = torch.nn.Linear(16, 16)
            y = F.dropout(layer(x), 0.1, training=True)
            attn = torch.softmax(y @ y.transpose(-2, -1) / math.sqrt(16), -1)
            mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
            out = (attn.masked_fill(mask, 0) @ x).sum()
            grad = torch.autograd.grad(out, layer.weight)[0]
            with torch.no_grad():
                z = torch.einsum("bqd,bkd->bqk", x, x).half().float()
            return [float(out), float(grad.abs().sum()), float(z.sum()), torch.get_num_threads(),
                    torch.cuda.is_available(), str(torch.float32)]
    """,
}
