"""The client of the services test: N closed-loop threads, each on its own keep-alive
connection to nginx (http.client), sending requests with an id in X-Request-Id and logging,
per request, the id, its kind, its process and OS thread and its CLOCK_MONOTONIC interval.
"""

import http.client
import json
import os
import sys
import threading
import time

host, port, clients, requests, log_path = sys.argv[1:6]
clients, requests = int(clients), int(requests)
KINDS = ["pooled", "fresh", "pg", "maria"]
log = open(log_path, "a", buffering=1)
lock = threading.Lock()
next_id = [0]
failures = []


def take():
    with lock:
        if next_id[0] >= requests:
            return None
        next_id[0] += 1
        return next_id[0]


def run():
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    while True:
        n = take()
        if n is None:
            break
        rid = "r%d" % n
        kind = KINDS[n % len(KINDS)]
        t0 = time.monotonic_ns()
        conn.request("GET", "/%s?id=%s" % (kind, rid), headers={"X-Request-Id": rid})
        resp = conn.getresponse()
        body = resp.read()
        t1 = time.monotonic_ns()
        if resp.status != 200 or not body.startswith(rid.encode() + b" "):
            failures.append((rid, resp.status, body[:80]))
        line = json.dumps(
            {
                "id": rid,
                "tier": "client",
                "kind": kind,
                "pid": os.getpid(),
                "tid": threading.get_native_id(),
                "t0": t0,
                "t1": t1,
            }
        )
        with lock:
            log.write(line + "\n")
    conn.close()


threads = [threading.Thread(target=run) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if failures:
    print("failed requests:", failures[:5], file=sys.stderr)
    sys.exit(1)
