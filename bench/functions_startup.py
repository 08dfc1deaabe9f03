"""Start-up of floe's function binaries: process start to first response, and binary sizes.

Each binary runs with a local-folder configuration (SQLite catalog and checkpoint table, as a
fresh instance opens them) and answers one cheap event:

  lambda  a minimal Runtime API (GET next / POST response) on 127.0.0.1; the clock stops
          when the function posts its response
  fc      the binary's own server on FC_SERVER_PORT; the clock stops when the first
          POST /invoke has been answered (connect attempts every 0.2 ms until the port opens)

Prints the median and the fastest of --runs runs (after one warm-up) and the size of each
release binary (the release profile strips them).
"""

import argparse
import http.server
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time

CONFIG = """
[source]
type = "local"
folder = "bucket"
[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"
[checkpoint]
path = "checkpoint.db"
[[routes]]
prefix = "events/"
table = "bench.events"
"""

EVENTS = {
    "ingest": {"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "b"},
    "poll": {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}},
    "commit": {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}},
    "backfill": {"mode": "SNAPSHOT"},
}


class RuntimeApi(http.server.BaseHTTPRequestHandler):
    """GET next serves the event once; POST response records the time."""

    event = b"{}"
    served = False
    answered = None

    def do_GET(self):
        cls = type(self)
        if cls.served:  # the function asks again after answering: hold it
            time.sleep(5)
            return
        cls.served = True
        self.send_response(200)
        self.send_header("Lambda-Runtime-Aws-Request-Id", "bench-0")
        self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 60000))
        self.send_header("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:1:function:bench")
        self.send_header("Content-Length", str(len(cls.event)))
        self.end_headers()
        self.wfile.write(cls.event)

    def do_POST(self):
        type(self).answered = time.perf_counter()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).body = body
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def lambda_once(binary, workdir, event):
    handler = type("H", (RuntimeApi,), {"event": json.dumps(event).encode(), "served": False, "answered": None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, FLOE_CONFIG=os.path.join(workdir, "floe.toml"), FLOE_LOG="warn",
               AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{server.server_address[1]}",
               AWS_LAMBDA_FUNCTION_NAME="bench", AWS_LAMBDA_FUNCTION_MEMORY_SIZE="512",
               AWS_LAMBDA_FUNCTION_VERSION="$LATEST")
    env.pop("FC_SERVER_PORT", None)
    start = time.perf_counter()
    proc = subprocess.Popen([binary], env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while handler.answered is None:
            if proc.poll() is not None:
                raise RuntimeError(f"{binary} exited with {proc.returncode}")
            if time.perf_counter() - start > 30:
                raise RuntimeError(f"{binary}: no response within 30 s")
            time.sleep(0.0002)
        return handler.answered - start
    finally:
        proc.kill()
        proc.wait()
        server.shutdown()
        server.server_close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fc_once(binary, workdir, event):
    port = free_port()
    body = json.dumps(event).encode()
    request = (f"POST /invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nx-fc-request-id: bench-0\r\n"
               f"x-fc-control-path: /invoke\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    env = dict(os.environ, FLOE_CONFIG=os.path.join(workdir, "floe.toml"), FLOE_LOG="warn",
               FC_SERVER_PORT=str(port))
    env.pop("AWS_LAMBDA_RUNTIME_API", None)
    start = time.perf_counter()
    proc = subprocess.Popen([binary], env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{binary} exited with {proc.returncode}")
            if time.perf_counter() - start > 30:
                raise RuntimeError(f"{binary}: port {port} not open within 30 s")
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=30)
            except OSError:
                time.sleep(0.0002)
                continue
            with conn:
                conn.sendall(request)
                answer = b""
                while chunk := conn.recv(65536):
                    answer += chunk
            if not answer.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"{binary}: {answer[:200]!r}")
            return time.perf_counter() - start
    finally:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    print(f"{'function':<10} {'size (MiB)':>10} {'lambda median':>14} {'lambda min':>11} {'fc median':>10} {'fc min':>8}")
    for name, event in EVENTS.items():
        binary = os.path.join(args.bin_dir, f"floe-{name}")
        size = os.path.getsize(binary) / (1 << 20)
        row = {}
        for platform, once in (("lambda", lambda_once), ("fc", fc_once)):
            times = []
            for i in range(args.runs + 1):
                with tempfile.TemporaryDirectory() as d:
                    os.makedirs(os.path.join(d, "bucket", "events"))
                    with open(os.path.join(d, "floe.toml"), "w") as f:
                        f.write(CONFIG)
                    t = once(binary, d, event)
                if i > 0:  # the first run warms the page cache
                    times.append(t * 1000)
            row[platform] = (statistics.median(times), min(times))
        print(f"{name:<10} {size:>10.1f} {row['lambda'][0]:>11.1f} ms {row['lambda'][1]:>8.1f} ms "
              f"{row['fc'][0]:>7.1f} ms {row['fc'][1]:>5.1f} ms")
    print("(process start to first response with a fresh local configuration: SQLite catalog and "
          "checkpoint table opened at start; target under 20 ms)")


if __name__ == "__main__":
    main()
