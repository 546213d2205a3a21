"""A backend tier of the services test: Python's ThreadingHTTPServer, unmodified library
code, answering each request in two sends (headers, then body) after calling redis through
redis-py (a pooled keep-alive connection, or a new connection per call), PostgreSQL
through psycopg or MariaDB through PyMySQL (a keep-alive connection per handler thread).

Each request's id comes in the X-Request-Id header; the handler logs, per request, the
id, its process and OS thread, and the CLOCK_MONOTONIC interval it spent on it (from the
start of reading the request to the end of its reply), one JSON line each.
"""

import http.server
import json
import os
import sys
import threading
import time

import psycopg
import pymysql
import redis

host, port, redis_host, redis_port, pg_dsn, maria, log_path = sys.argv[1:8]
maria_host, maria_port = maria.rsplit(":", 1)
pool = redis.ConnectionPool(host=redis_host, port=int(redis_port))
log = open(log_path, "a", buffering=1)
log_lock = threading.Lock()
local = threading.local()


def pg():
    c = getattr(local, "pg", None)
    if c is None:
        c = psycopg.connect(pg_dsn, autocommit=True)
        local.pg = c
    return c


def maria_db():
    c = getattr(local, "maria", None)
    if c is None:
        c = pymysql.connect(host=maria_host, port=int(maria_port), user="root", autocommit=True)
        local.maria = c
    return c


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_one_request(self):
        self.t0 = time.monotonic_ns()
        self.rid = None
        super().handle_one_request()
        if self.rid is not None:
            line = json.dumps(
                {
                    "id": self.rid,
                    "tier": "backend",
                    "pid": os.getpid(),
                    "tid": threading.get_native_id(),
                    "t0": self.t0,
                    "t1": time.monotonic_ns(),
                }
            )
            with log_lock:
                log.write(line + "\n")

    def do_GET(self):
        self.rid = self.headers.get("X-Request-Id")
        kind = self.path.strip("/").split("?")[0]
        if kind == "pooled":
            r = redis.Redis(connection_pool=pool)
            r.set("k" + self.rid, self.rid)
            value = r.get("k" + self.rid)
        elif kind == "fresh":
            r = redis.Redis(host=redis_host, port=int(redis_port))
            value = r.incr("n")
            r.close()
        elif kind == "maria":
            with maria_db().cursor() as cur:
                cur.execute("SELECT %s", (self.rid,))
                value = cur.fetchone()[0]
        else:
            with pg().cursor() as cur:
                cur.execute("SELECT %s::text", (self.rid,))
                value = cur.fetchone()[0]
        body = ("%s %s\n" % (self.rid, value)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
server.daemon_threads = True
print("ready", flush=True)
server.serve_forever()
