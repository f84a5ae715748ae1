"""`mpiexec -n R distpart ...` inside a shell script that a test runs (the docs' marked
blocks), answered by the test process's standing MPI jobs (rank_pool.py) instead of a new
mpiexec, its ranks, their imports and MPI_Init.

`serving()` puts a directory first on the script's PATH whose `mpiexec` is this file, and
answers it on a Unix socket from a thread of the test process (which waits for the script
meanwhile, so the pools have one user at a time). What is not `-n R distpart ...` with R a
pooled rank count, or cannot be pooled, runs the real mpiexec, found further on the PATH.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional

SOCKET_VAR = "DISTPART_TEST_MPIEXEC_SOCKET"


# ---------------------------------------------------------------- the script's side

def _real_mpiexec(own_dir: str) -> Optional[str]:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(d, "mpiexec")
        if d and os.path.realpath(d) != os.path.realpath(own_dir) and os.access(path, os.X_OK):
            return path
    return None


def _ask(path: str, request: dict) -> Optional[dict]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
        except OSError:
            return None
        conn.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(1 << 16)
            if not chunk:
                return None
            data += chunk
    return json.loads(data)


def main(argv: List[str]) -> int:
    path = os.environ.get(SOCKET_VAR)
    if path and len(argv) >= 3 and argv[0] in ("-n", "-np") and argv[1].isdigit() and argv[2] == "distpart":
        reply = _ask(path, {"nranks": int(argv[1]), "argv": argv[3:], "cwd": os.getcwd()})
        if reply is not None and reply["pooled"]:
            sys.stdout.write(reply["out"])
            sys.stdout.flush()
            sys.stderr.write(reply["err"])
            return int(reply["status"])
    real = _real_mpiexec(os.path.dirname(os.path.abspath(sys.argv[0])))
    if real is None:
        print("mpiexec: not found on PATH", file=sys.stderr)
        return 127
    os.execv(real, [real, *argv])
    return 127   # not reached


# ---------------------------------------------------------------- the test process's side

def _answer(conn: socket.socket, timeout: float) -> None:
    import harness
    with conn, conn.makefile("rw", encoding="utf-8") as stream:
        request = json.loads(stream.readline())
        done = harness.pooled(int(request["nranks"]), request["argv"], timeout, cwd=request["cwd"])
        if done is None or done[3]:   # not pooled, or timed out: the script's own mpiexec decides
            reply: Dict[str, object] = {"pooled": False}
        else:
            reply = {"pooled": True, "status": done[0], "out": done[1], "err": done[2]}
        stream.write(json.dumps(reply) + "\n")


@contextmanager
def serving(env: Dict[str, str], timeout: float) -> Iterator[Dict[str, str]]:
    """`env` with this file as the `mpiexec` first on PATH, answered while the block lasts."""
    with tempfile.TemporaryDirectory(prefix="pooled-mpiexec-") as tmp:
        shim = Path(tmp) / "mpiexec"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{Path(__file__).resolve()}" "$@"\n')
        shim.chmod(0o755)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(Path(tmp) / "s"))
        listener.listen(4)

        def loop() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:   # shut down: the block is over
                    return
                try:
                    _answer(conn, timeout)
                except BaseException:   # the script then runs its own mpiexec, never waits
                    conn.close()

        thread = threading.Thread(target=loop, name="pooled-mpiexec", daemon=True)
        thread.start()
        try:
            yield dict(env, PATH=os.pathsep.join([tmp, env.get("PATH", "")]), **{SOCKET_VAR: str(Path(tmp) / "s")})
        finally:
            listener.shutdown(socket.SHUT_RDWR)   # wakes the accept
            thread.join()
            listener.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
