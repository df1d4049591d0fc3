#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A grpcio fleet: open-loop Poisson arrivals at --rate logical requests per second for
--duration seconds, spread round-robin over --clients channels, each logical request one call of
stormguard.lab.v1.Scenario/Call (`serve --grpc`, proto/stormguard/lab/v1/scenario.proto) made
by Python's grpcio as Debian 12 packages it (python3-grpcio 1.51), unchanged: its retries and
its retry throttling are gRPC's own, from the service config --service-config names (gRFC A6:
retryPolicy per method, retryThrottling per channel; `grpc.enable_retries` is on, the default).
Its call deadline is the service config's `timeout`, given to each call as its own timeout
instead: with a `timeout` in the service config, grpcio 1.51 (Debian 12) ends every call at once
with DEADLINE_EXCEEDED, before any attempt is sent (the key is taken out of the config grpcio
gets; the deadline means the same either way: it bounds the call, every attempt included). The
request message is empty (its one field at its default), so no generated code is needed: the
call sends and reads raw bytes.

What gRPC's retries do inside a call the application cannot see: a call is one record here,
however many attempts C-core made for it. C-core labels each retry with
grpc-previous-rpc-attempts, which `serve` counts (GET /stats retry_signals), so serve's first
attempts are its attempts minus those.

Output: one JSON document (stdout, or --out FILE) in the form of the other fleets'
(fleets/curl/fleet.py): the run's settings and one record per logical request, times in ns since
t = 0 (the instant the --start-url POST was answered); `attempts` is 1 (a call: the attempts are
C-core's). Python 3 and python3-grpcio only.
"""
import argparse
import json
import random
import sys
import threading
import time
import urllib.request

NS = 1_000_000_000
METHOD = "/stormguard.lab.v1.Scenario/Call"


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def positive_int(text):
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1 or value > 10_000:
        raise argparse.ArgumentTypeError(f"must be in [1, 10000], got {text!r}")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(prog="fleets/grpcio/fleet.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True, help="serve's gRPC listener, 127.0.0.1:PORT")
    p.add_argument("--rate", type=positive_float, required=True, help="logical requests per second")
    p.add_argument("--duration", type=positive_float, required=True, help="seconds")
    p.add_argument("--clients", type=positive_int, default=2,
                   help="channels (each with its own retry throttling), default 2")
    p.add_argument("--service-config", required=True, metavar="FILE",
                   help="the gRPC service config (JSON) every channel gets")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--start-url", help="POSTed at t = 0 (serve's /control/start)")
    p.add_argument("--out", default="-", help="the JSON document's file (default: stdout)")
    return p.parse_args(argv)


def proto_seconds(text, where):
    """A protobuf JSON Duration ("1s", "0.25s") in seconds."""
    if not isinstance(text, str) or not text.endswith("s"):
        raise ValueError(f"{where}: not a duration such as \"1s\": {text!r}")
    try:
        value = float(text[:-1])
    except ValueError:
        raise ValueError(f"{where}: not a duration such as \"1s\": {text!r}") from None
    if not value > 0:
        raise ValueError(f"{where}: must be > 0, got {text!r}")
    return value


def split_timeout(config):
    """The config without its methodConfig timeouts, and the one timeout they set (seconds, or
    None); methods with different timeouts are refused (the fleet calls one method)."""
    timeouts = set()
    for i, method in enumerate(config.get("methodConfig", [])):
        if "timeout" in method:
            timeouts.add(proto_seconds(method.pop("timeout"), f"methodConfig[{i}].timeout"))
    if len(timeouts) > 1:
        raise ValueError(f"methodConfig: the fleet calls one method; timeouts {sorted(timeouts)}")
    return config, (timeouts.pop() if timeouts else None)


def start_clock(url):
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        resp.read()


def run(args):
    import grpc  # python3-grpcio (scripts/bootstrap --components fleets)

    with open(args.service_config, encoding="utf-8") as f:
        service_config = f.read()
    given, call_timeout = split_timeout(json.loads(service_config))
    options = [("grpc.service_config", json.dumps(given)), ("grpc.enable_retries", 1)]
    channels = [grpc.insecure_channel(args.target, options=options) for _ in range(args.clients)]
    calls = [ch.unary_unary(METHOD, request_serializer=lambda b: b,
                            response_deserializer=lambda b: b) for ch in channels]
    for ch in channels:  # connected before t = 0: the first arrivals do not pay the handshake
        grpc.channel_ready_future(ch).result(timeout=10)

    rng = random.Random(args.seed)
    duration_ns = int(args.duration * NS)
    lock = threading.Lock()
    records = []
    pending = [0]
    all_done = threading.Event()

    if args.start_url:
        start_clock(args.start_url)
    t0 = time.monotonic_ns()

    def finished(rec, future):
        end_ns = time.monotonic_ns() - t0
        code = future.code()
        rec["end_ns"] = end_ns
        rec["status"] = int(code.value[0]) if code is not None else -1
        if code == grpc.StatusCode.OK:
            rec.update(ok=True, outcome="ok")
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            rec["outcome"] = "timeout"
        elif code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
            details = future.details() or ""
            rec["outcome"] = "status" if details.startswith("stormguard admission:") else "transport"
        else:
            rec["outcome"] = "transport"
        if end_ns >= duration_ns:
            rec.update(ok=False, outcome="cut", end_ns=-1)
        with lock:
            pending[0] -= 1
            if pending[0] == 0:
                all_done.set()

    next_ns = int(rng.expovariate(args.rate) * NS)
    request_id = 0
    while next_ns < duration_ns:
        wait = (t0 + next_ns - time.monotonic_ns()) / NS
        if wait > 0:
            time.sleep(wait)
        sent_ns = time.monotonic_ns() - t0
        rec = {"id": request_id, "arrival_ns": next_ns, "sent_ns": sent_ns,
               "dispatched_ns": sent_ns, "end_ns": -1, "ok": False, "status": 0,
               "attempts": 1, "outcome": "cut"}
        with lock:
            records.append(rec)
            pending[0] += 1
        future = calls[request_id % len(calls)].future(b"", timeout=call_timeout)
        future.add_done_callback(lambda fut, rec=rec: finished(rec, fut))
        request_id += 1
        next_ns += int(rng.expovariate(args.rate) * NS)
    wait = (t0 + duration_ns - time.monotonic_ns()) / NS
    if wait > 0:
        time.sleep(wait)
    # The calls still in flight at the end are cut (as the other fleets' are): closing the
    # channels cancels them.
    for ch in channels:
        ch.close()
    all_done.wait(timeout=10)
    wall_ns = time.monotonic_ns() - t0
    with lock:
        snapshot = list(records)
    document = {"fleet": "grpcio", "target": args.target, "rate": args.rate,
                "duration_ns": duration_ns, "clients": args.clients, "targets": "distinct",
                "service_config": json.loads(service_config), "call_timeout_s": call_timeout,
                "seed": args.seed,
                "started_clock": bool(args.start_url), "grpcio": grpc.__version__,
                "wall_ns": wall_ns, "requests": snapshot}
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
    except ImportError:
        print("fleets/grpcio/fleet.py: python3-grpcio is not installed "
              "(scripts/bootstrap --components fleets)", file=sys.stderr)
        return 1
    except (OSError, ValueError, RuntimeError) as e:
        print(f"fleets/grpcio/fleet.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
