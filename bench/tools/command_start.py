#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times whole processes side by side: each command is started, runs to its end, and is waited
for, with its stdout and stderr to /dev/null. The commands take turns within each round (in an
order that rotates from one round to the next, so that a slow spell of a shared machine hits them
all alike), and the table gives each one's median wall time and the ratio of its median to the
first command's, measured in the same run.

With --server, a local HTTP server is started first (Python's http.server on 127.0.0.1, any free
port, serving a 1 KiB file) and {url} in a command is replaced with its URL, so that
`stormguard http` and `curl` make the same request to the same server:

  bench/tools/command_start.py --server --runs 300 \\
    'curl -s {url}' 'build/bin/stormguard http {url}'
"""
import argparse
import http.server
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no line per request on stderr
        pass


def start_server(folder: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    with open(os.path.join(folder, "body.txt"), "w", encoding="ascii") as f:
        f.write("x" * 1023 + "\n")

    def handler(*args, **kwargs):
        return QuietHandler(*args, directory=folder, **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/body.txt"


def run_once(argv: list[str], null: int) -> tuple[float, int]:
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[
        (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
    _, status = os.waitpid(pid, 0)
    return (time.perf_counter_ns() - start) / 1e6, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commands", nargs="+", help="the commands; the first is the baseline")
    parser.add_argument("--runs", type=int, default=200, help="rounds (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed rounds first (default 10)")
    parser.add_argument("--server", action="store_true", help="start a local HTTP server for {url}")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        server, url = start_server(folder) if args.server else (None, "")
        argvs = []
        for command in args.commands:
            argv = shlex.split(command.replace("{url}", url))
            resolved = shutil.which(argv[0])
            if resolved is None:
                print(f"command_start: {argv[0]}: not found", file=sys.stderr)
                return 2
            argvs.append([resolved] + argv[1:])
        times: list[list[float]] = [[] for _ in argvs]
        null = os.open(os.devnull, os.O_WRONLY)
        order = list(range(len(argvs)))
        for round_number in range(args.warmup + args.runs):
            for i in order[round_number % len(order):] + order[:round_number % len(order)]:
                elapsed, status = run_once(argvs[i], null)
                if status != 0:
                    print(f"command_start: {args.commands[i]!r} exited with {status}",
                          file=sys.stderr)
                    return 1
                if round_number >= args.warmup:
                    times[i].append(elapsed)
        if server is not None:
            server.shutdown()

    base = statistics.median(times[0])
    header = "| command | median (ms) | p10–p90 (ms) | ratio to the first |"
    print(header)
    print("|" + " --- |" * header.count(" |"))
    for command, samples in zip(args.commands, times):
        deciles = statistics.quantiles(samples, n=10)
        row = (f"| `{command.replace('{url}', 'URL')}` | {statistics.median(samples):.2f} | "
               f"{deciles[0]:.2f}–{deciles[-1]:.2f} | {statistics.median(samples) / base:.2f} |")
        print(row)
    print(f"\n{args.runs} rounds after {args.warmup} untimed ones; load average "
          f"{os.getloadavg()[0]:.2f} at the end.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
