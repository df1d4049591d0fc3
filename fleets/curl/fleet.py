#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A curl fleet: open-loop Poisson arrivals at --rate logical requests per second for
--duration seconds, each logical request one process of

    curl -q --no-progress-meter -v -w '\\ncurl-result %{http_code}\\n'
         --retry 4 --retry-all-errors --max-time 1 URL > FILE 2>&1

as a shell script would run it (no attempt count, no deadline, no pushback header sent or read).
curl's own retry rules apply unchanged: --retry 4 retries a time-out and an HTTP 408, 429, 500,
502, 503 or 504 up to 4 times, waiting 1 s then doubling (1, 2, 4, 8 s), or the answer's
Retry-After when it has one (curl >= 7.66.0); --retry-all-errors retries any other error too;
--max-time 1 limits each attempt (the timer is reset for each retry, curl(1)), as the scenario's
1-s time-out. -q ignores a ~/.curlrc; -v and -w only add output: each "> GET" line of -v is an
attempt sent, the -w line the final status. Proxy variables are removed from curl's environment
(the server is on loopback). The body goes to stdout, not to `-o /dev/null`: curl 7.88 cannot
truncate /dev/null before a retry of an answer that had a body (a 503 "queue full") and ends
with exit 23, "Failed to truncate file", instead of retrying.

Output: one JSON document (stdout, or --out FILE) in the same form as the go-retryablehttp
fleet's: the run's settings and one record per logical request, times in ns since t = 0 (the
instant the --start-url POST was answered). Python 3 standard library only; Linux (posix_spawn,
waitpid).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                   "ALL_PROXY", "no_proxy", "NO_PROXY")


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def nonnegative_int(text):
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(prog="fleets/curl/fleet.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--rate", type=positive_float, default=200.0, help="logical requests per second")
    p.add_argument("--duration", type=positive_float, default=60.0, help="seconds of arrivals")
    p.add_argument("--targets", choices=("distinct", "identical"), default="distinct",
                   help="distinct: GET /orders/<n> per logical request; identical: GET /")
    p.add_argument("--retry", type=nonnegative_int, default=4, help="curl --retry N (default 4)")
    p.add_argument("--max-time", type=positive_float, default=1.0,
                   help="curl --max-time S, per attempt (default 1)")
    p.add_argument("--seed", type=nonnegative_int, default=1, help="the arrivals' random seed")
    p.add_argument("--start-url", default="", help="POST this URL (serve's /control/start) at t = 0")
    p.add_argument("--curl", default="curl", help="the curl program (default: curl on PATH)")
    p.add_argument("--out", default="-", help="where the JSON goes (- = stdout)")
    return p.parse_args(argv)


class Children:
    """Spawned curl processes and their ends, reaped by one thread with waitpid(-1)."""

    def __init__(self, t0_ns):
        self.t0_ns = t0_ns
        self.lock = threading.Lock()
        self.running = {}   # pid -> request id
        self.ended = {}     # request id -> (end_ns, exit status or -signal)
        self.done = False
        self.thread = threading.Thread(target=self._reap, daemon=True)
        self.thread.start()

    def spawn(self, request_id, argv, out_path, env):
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                   (os.POSIX_SPAWN_DUP2, 1, 2)]
        with self.lock:  # the reaper cannot see the pid before it is mapped to its request
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
            self.running[pid] = request_id

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                with self.lock:
                    if self.done and not self.running:
                        return
                time.sleep(0.005)
                continue
            end_ns = time.monotonic_ns() - self.t0_ns
            code = os.waitstatus_to_exitcode(status)
            with self.lock:
                request_id = self.running.pop(pid, None)
                if request_id is not None:
                    self.ended[request_id] = (end_ns, code)

    def kill_all(self):
        with self.lock:
            pids = list(self.running)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def finish(self):
        with self.lock:
            self.done = True
        self.thread.join()


RESULT = re.compile(rb"curl-result (\d{3})")


def read_result(path):
    """(attempts sent, final HTTP status or None) from one curl's output: the bodies (stdout,
    buffered, so a body may sit just before a line of -v), -v's lines and the -w line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return 0, None
    results = RESULT.findall(data)
    return data.count(b"> GET /"), int(results[-1]) if results else None


def start_clock(url):
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"POST {url}: status {resp.status}")


def run(args):
    curl = shutil.which(args.curl)
    if curl is None:
        raise RuntimeError(f"--curl: no such program: {args.curl!r}")
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    base = args.url.rstrip("/")
    rng = random.Random(args.seed)
    duration_ns = int(args.duration * 1e9)
    workdir = tempfile.mkdtemp(prefix="stormguard-curl-fleet-")
    try:
        if args.start_url:
            start_clock(args.start_url)
        t0 = time.monotonic_ns()
        children = Children(t0)
        arrivals = []  # (arrival_ns, sent_ns)
        next_ns = int(rng.expovariate(args.rate) * 1e9)
        while next_ns < duration_ns:
            wait = (t0 + next_ns - time.monotonic_ns()) / 1e9
            if wait > 0:
                time.sleep(wait)
            request_id = len(arrivals)
            target = f"/orders/{request_id}" if args.targets == "distinct" else "/"
            argv = [curl, "-q", "--no-progress-meter", "-v",
                    "-w", "\\ncurl-result %{http_code}\\n", "--retry", str(args.retry),
                    "--retry-all-errors", "--max-time", repr(args.max_time), base + target]
            arrivals.append((next_ns, time.monotonic_ns() - t0))
            children.spawn(request_id, argv, os.path.join(workdir, str(request_id)), env)
            next_ns += int(rng.expovariate(args.rate) * 1e9)
        wait = (t0 + duration_ns - time.monotonic_ns()) / 1e9
        if wait > 0:
            time.sleep(wait)
        cut = set()
        with children.lock:
            cut.update(children.running.values())
        children.kill_all()
        children.finish()
        wall_ns = time.monotonic_ns() - t0

        records = []
        for request_id, (arrival_ns, sent_ns) in enumerate(arrivals):
            attempts, status = read_result(os.path.join(workdir, str(request_id)))
            end_ns, code = children.ended.get(request_id, (-1, None))
            rec = {"id": request_id, "arrival_ns": arrival_ns, "sent_ns": sent_ns, "end_ns": -1,
                   "ok": False, "status": status or 0, "attempts": attempts, "exit_code": code}
            if request_id in cut or end_ns < 0 or end_ns >= duration_ns:
                rec["outcome"] = "cut"
            elif status is not None and 200 <= status < 300 and code == 0:
                rec.update(ok=True, outcome="ok", end_ns=end_ns)
            elif code == 28:
                rec.update(outcome="timeout", end_ns=end_ns)
            elif code == 0 and status:
                rec.update(outcome="status", end_ns=end_ns)
            else:
                rec.update(outcome="transport", end_ns=end_ns)
            records.append(rec)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    document = {"fleet": "curl", "base_url": base, "rate": args.rate, "duration_ns": duration_ns,
                "clients": None, "targets": args.targets, "attempt_timeout": f"{args.max_time}s",
                "retry_max": args.retry, "seed": args.seed, "started_clock": bool(args.start_url),
                "wall_ns": wall_ns, "requests": records}
    text = json.dumps(document, separators=(",", ":")) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)


def main(argv):
    args = parse_args(argv)
    try:
        run(args)
    except (OSError, RuntimeError) as e:
        print(f"fleets/curl/fleet.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
