#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What `serve --grpc` pays for the calls it holds: starts `stormguard serve` on a scenario whose
every attempt is lost (never answered), opens --calls calls without a deadline over 20
connections with Python's grpcio (Debian's python3-grpcio), waits --wait seconds, and prints
serve's resident memory before and with the calls held, how many calls are held and how many were
answered at once (beyond serve's 10,000: RESOURCE_EXHAUSTED), then how long serve takes to stop
on SIGTERM with every call held. Loopback only; the scenario is written to a temporary directory.

    /usr/bin/python3 fleets/grpcio/held_calls.py --stormguard build/bin/stormguard --calls 10100
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc

METHOD = "/stormguard.lab.v1.Scenario/Call"
CONNECTIONS = 20


def rss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stormguard", required=True, help="the stormguard program")
    p.add_argument("--calls", type=int, default=10_100, help="calls to open, default 10100")
    p.add_argument("--wait", type=float, default=5.0, help="seconds before measuring, default 5")
    args = p.parse_args()
    if not 1 <= args.calls <= 1_000_000:
        sys.exit(f"held_calls.py: --calls must be in [1, 1000000], got {args.calls}")
    if not 0 < args.wait <= 600:
        sys.exit(f"held_calls.py: --wait must be in (0, 600] seconds, got {args.wait}")
    scenario = {
        "name": "all-lost", "seed": 1, "duration": "600s", "requests_per_second": 10,
        "clients": 1, "timeout": "1s",
        "server": {"workers": 10, "queue_limit": 100_000, "service_time": "1ms",
                   "service_distribution": "fixed"},
        "incident": {"start": "0s", "end": "600s", "loss_rate": 1.0},
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "all-lost.json")
        with open(path, "w", encoding="ascii") as f:
            json.dump(scenario, f)
        serve = subprocess.Popen([args.stormguard, "serve", path, "--grpc"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            serve.stdout.readline()  # listening on http://...
            target = serve.stdout.readline().strip().split("grpc listening on ")[1]
            before = rss_kib(serve.pid)
            options = [("grpc.enable_retries", 0), ("grpc.use_local_subchannel_pool", 1)]
            channels = [grpc.insecure_channel(target, options=options)
                        for _ in range(CONNECTIONS)]
            calls = [c.unary_unary(METHOD, request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b) for c in channels]
            futures = [calls[i % CONNECTIONS].future(b"") for i in range(args.calls)]
            time.sleep(args.wait)
            answered = {}
            for f in futures:
                if f.done():
                    answered[f.code().name] = answered.get(f.code().name, 0) + 1
            held = args.calls - sum(answered.values())
            with_calls = rss_kib(serve.pid)
            began = time.monotonic()
            serve.send_signal(signal.SIGTERM)
            status = serve.wait(timeout=60)
            took = time.monotonic() - began
        finally:
            if serve.poll() is None:
                serve.kill()
                serve.wait()
    print(f"calls held: {held}; answered at once: {answered or 'none'}")
    print(f"serve's resident memory: {before / 1024:.1f} MiB before, "
          f"{with_calls / 1024:.1f} MiB with the calls held "
          f"({(with_calls - before) / max(held, 1):.1f} KiB per call held)")
    print(f"SIGTERM to exit: {took:.2f} s (exit status {status})")
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
