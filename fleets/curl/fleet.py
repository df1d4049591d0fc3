#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A curl fleet: open-loop Poisson arrivals at --rate logical requests per second for
--duration seconds, each logical request one process of

    curl -q --no-progress-meter -v --trace-time -w '\\ncurl-result %{http_code}\\n'
         --retry 4 --retry-all-errors --max-time 1 -K - > FILE 2>&1

with `url = "URL"` on its standard input (no attempt count, no deadline, no pushback header sent
or read). curl's own retry rules apply unchanged: --retry 4 retries a time-out and an HTTP 408,
429, 500, 502, 503 or 504 up to 4 times, waiting 1 s then doubling (1, 2, 4, 8 s), or the
answer's Retry-After when it has one (curl >= 7.66.0); --retry-all-errors retries any other error
too; --max-time 1 limits each attempt (the timer is reset for each retry, curl(1)), as the
scenario's 1-s time-out. -q ignores a ~/.curlrc; -v, --trace-time and -w only add output: each
"> GET" line of -v is an attempt sent, the first time stamp when the first attempt began, the -w
line the final status. Proxy variables are removed from curl's environment (the server is on
loopback). The body goes to stdout, not to `-o /dev/null`: curl 7.88 cannot truncate /dev/null
before a retry of an answer that had a body (serve's 503s have one) and ends with exit 23,
"Failed to truncate file", instead of retrying.

`-K -` (the URL from a config on stdin, which is the command line's syntax) lets each process be
started up to a quarter of a second before its arrival: starting curl costs about 5 ms of CPU
here, so at 200 req/s the fleet needs about one core, and the start is kept off the arrival's
time. A request's `sent_ns` is the later of the instant its URL was written and curl's first
time-stamped line: a curl starved of CPU shows as late.

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

NS = 1_000_000_000
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
    """curl processes, spawned ahead of their arrival and reaped by one thread (waitpid(-1)).

    Each is spawned with `-K -` and blocks reading its configuration from a pipe: exec, the
    dynamic loader and curl's global set-up (about 5 ms of CPU each here) happen before its
    arrival; at the arrival the fleet writes `url = "..."` and closes the pipe, and curl starts
    the transfer. A slot is one spawned process, numbered in spawn order."""

    def __init__(self, argv, workdir, env, t0_ns):
        self.argv, self.workdir, self.env, self.t0_ns = argv, workdir, env, t0_ns
        self.lock = threading.Lock()
        self.ready = []      # (slot, pid, write end of its stdin), oldest first
        self.running = {}    # pid -> slot
        self.ended = {}      # slot -> (end_ns, exit status or -signal)
        self.slots = 0
        self.done = False
        self.reaper = threading.Thread(target=self._reap, daemon=True)
        self.reaper.start()

    def output(self, slot):
        return os.path.join(self.workdir, str(slot))

    def spawn(self):
        r, w = os.pipe()
        with self.lock:  # the reaper cannot see the pid before it is mapped to its slot
            slot = self.slots
            self.slots += 1
            actions = [(os.POSIX_SPAWN_DUP2, r, 0), (os.POSIX_SPAWN_CLOSE, r),
                       (os.POSIX_SPAWN_OPEN, 1, self.output(slot),
                        os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                       (os.POSIX_SPAWN_DUP2, 1, 2)]
            try:
                pid = os.posix_spawn(self.argv[0], self.argv, self.env, file_actions=actions)
            except OSError:
                os.close(w)
                raise
            finally:
                os.close(r)
            self.running[pid] = slot
            self.ready.append((slot, pid, w))

    def ready_count(self):
        with self.lock:
            return len(self.ready)

    def take(self):
        with self.lock:
            return self.ready.pop(0) if self.ready else None

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
                slot = self.running.pop(pid, None)
                if slot is not None:
                    self.ended[slot] = (end_ns, code)

    def kill(self, pids):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def running_slots(self):
        with self.lock:
            return dict(self.running)

    def finish(self):
        with self.lock:
            self.done = True
            unused = self.ready
            self.ready = []
        self.kill([pid for _, pid, _ in unused])
        for _, _, w in unused:
            os.close(w)
        self.reaper.join()


RESULT = re.compile(rb"curl-result (\d{3})")
TRACE_TIME = re.compile(rb"^(\d\d):(\d\d):(\d\d)\.(\d{6}) ", re.M)


def read_result(path):
    """(attempts sent, final HTTP status or None, curl's first --trace-time stamp as (second of
    the day, microseconds) or None) from one curl's output: the bodies (stdout, buffered, so a
    body may sit just before a line of -v), -v's lines and the -w line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return 0, None, None
    results = RESULT.findall(data)
    first = TRACE_TIME.search(data)
    stamp = None
    if first:
        h, m, sec, us = (int(x) for x in first.groups())
        stamp = ((h * 60 + m) * 60 + sec, us)
    return data.count(b"> GET /"), int(results[-1]) if results else None, stamp


def started_ns(stamp, t0_mono_ns, t0_local_s, dispatched_ns):
    """When curl's first attempt began, in ns since t = 0, from its --trace-time stamp. curl 7.88
    prints the monotonic clock's microseconds (exact: the fleet reads the same clock) after whole
    seconds of the wall clock fixed once, which may be off by one. So the lag after the dispatch
    is taken from the microseconds, modulo 1 s (within 50 ms before the dispatch, as another
    thread may run between the clock's reading and the write: 0), unless the whole seconds say
    it is 2 s or more."""
    if stamp is None:
        return dispatched_ns
    second, us = stamp
    dispatched_mono = t0_mono_ns + dispatched_ns
    fine = (us * 1000 - dispatched_mono % NS) % NS
    day = 86_400
    coarse_s = (second - t0_local_s + day // 2) % day - day // 2 - dispatched_ns / NS
    if coarse_s >= 2:
        return dispatched_ns + int(coarse_s * NS)
    return dispatched_ns + (0 if fine > NS - 50_000_000 else fine)


def start_clock(url):
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"POST {url}: status {resp.status}")


def local_second_of_day(wall_ns):
    tm = time.localtime(wall_ns // NS)
    return (tm.tm_hour * 60 + tm.tm_min) * 60 + tm.tm_sec + (wall_ns % NS) / NS


def keep_ready(children, stop, ahead):
    """The spawner thread: keeps `ahead` curl processes waiting for their configuration."""
    while not stop.is_set():
        if children.ready_count() < ahead:
            children.spawn()
        else:
            time.sleep(0.002)


def run(args):
    curl = shutil.which(args.curl)
    if curl is None:
        raise RuntimeError(f"--curl: no such program: {args.curl!r}")
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    base = args.url.rstrip("/")
    rng = random.Random(args.seed)
    duration_ns = int(args.duration * 1e9)
    argv = [curl, "-q", "--no-progress-meter", "-v", "--trace-time",
            "-w", "\\ncurl-result %{http_code}\\n", "--retry", str(args.retry),
            "--retry-all-errors", "--max-time", repr(args.max_time), "-K", "-"]
    ahead = max(8, int(args.rate / 4))
    workdir = tempfile.mkdtemp(prefix="stormguard-curl-fleet-")
    try:
        children = Children(argv, workdir, env, 0)
        while children.ready_count() < ahead:
            children.spawn()
        stop = threading.Event()
        spawner = threading.Thread(target=keep_ready, args=(children, stop, ahead), daemon=True)
        spawner.start()
        if args.start_url:
            start_clock(args.start_url)
        t0 = time.monotonic_ns()
        t0_local = local_second_of_day(time.time_ns())
        children.t0_ns = t0
        arrivals = []  # (arrival_ns, dispatched_ns, slot)
        next_ns = int(rng.expovariate(args.rate) * 1e9)
        while next_ns < duration_ns:
            wait = (t0 + next_ns - time.monotonic_ns()) / 1e9
            if wait > 0:
                time.sleep(wait)
            request_id = len(arrivals)
            target = f"/orders/{request_id}" if args.targets == "distinct" else "/"
            taken = children.take()
            while taken is None:  # the spawner fell behind: spawn here
                children.spawn()
                taken = children.take()
            slot, _, w = taken
            arrivals.append((next_ns, time.monotonic_ns() - t0, slot))
            os.write(w, f'url = "{base}{target}"\n'.encode())
            os.close(w)
            next_ns += int(rng.expovariate(args.rate) * 1e9)
        wait = (t0 + duration_ns - time.monotonic_ns()) / 1e9
        if wait > 0:
            time.sleep(wait)
        stop.set()
        spawner.join()
        in_flight = children.running_slots()  # pid -> slot: still running at the end
        children.kill(list(in_flight))
        cut_slots = set(in_flight.values())
        children.finish()
        wall_ns = time.monotonic_ns() - t0

        records = []
        for request_id, (arrival_ns, dispatched_ns, slot) in enumerate(arrivals):
            attempts, status, stamp = read_result(children.output(slot))
            end_ns, code = children.ended.get(slot, (-1, None))
            rec = {"id": request_id, "arrival_ns": arrival_ns,
                   "sent_ns": started_ns(stamp, t0, t0_local, dispatched_ns),
                   "dispatched_ns": dispatched_ns,
                   "end_ns": -1, "ok": False, "status": status or 0, "attempts": attempts,
                   "exit_code": code}
            if slot in cut_slots or end_ns < 0 or end_ns >= duration_ns:
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
                "spawned_ahead": ahead, "wall_ns": wall_ns, "requests": records}
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
