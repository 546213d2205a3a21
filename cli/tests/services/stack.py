"""Starts the services test's stack — redis, two Python backends, nginx in front — each
tier on its own loopback address, runs the client against nginx, and stops every tier.
Run under `p5 record --preload`, every process is recorded as it is, except two tiers that
can be instrumented instead (they record themselves through p5's runtime, and run with
`P5_PRELOAD=0` so the interposer leaves them alone):

    stack.py DIR CLIENTS REQUESTS KEEPALIVE(0|1) BASEPORT PG_DSN MARIA_HOST:PORT

- `SVC_C_CLIENT=PATH`: the client is that program (client.c built with the runtime)
  instead of client.py;
- `SVC_BACKEND2=DIR`: the second backend is DIR/backend.py (instrumented), run with
  `PYTHONPATH=$SVC_P5_PYTHON` (p5's Python client).

The tiers' logs (one JSON line per request) go to DIR/requests.jsonl.
"""

import os
import signal
import socket
import subprocess
import sys
import time

out, clients, requests, keepalive, base, pg_dsn, maria = sys.argv[1:8]
base = int(base)
here = os.path.dirname(os.path.abspath(__file__))
log = os.path.join(out, "requests.jsonl")
NGINX, B1, B2, REDIS = ("127.0.0.2", base), ("127.0.0.3", base + 1), ("127.0.0.4", base + 2), ("127.0.0.5", base + 3)
procs = []


def wait_port(addr, what, p):
    deadline = time.time() + 20
    while time.time() < deadline:
        if p.poll() is not None:
            sys.exit("%s exited with %s before it listened" % (what, p.returncode))
        try:
            socket.create_connection(addr, timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("%s did not listen on %s:%d" % (what, *addr))


def instrumented_env(extra=None):
    """The environment of a tier that records itself: the interposer stays passive there."""
    env = dict(os.environ, P5_PRELOAD="0")
    env.update(extra or {})
    return env


def start(args, what, addr, env=None):
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, env=env)
    procs.append(p)
    wait_port(addr, what, p)


def stop():
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.time() + 10
    for p in reversed(procs):
        try:
            p.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


try:
    start(
        ["redis-server", "--bind", REDIS[0], "--port", str(REDIS[1]), "--save", "",
         "--appendonly", "no", "--dir", out, "--daemonize", "no", "--loglevel", "warning"],
        "redis-server", REDIS,
    )
    for b in (B1, B2):
        script, env = os.path.join(here, "backend.py"), None
        if b == B2 and os.environ.get("SVC_BACKEND2"):
            script = os.path.join(os.environ["SVC_BACKEND2"], "backend.py")
            env = instrumented_env({"PYTHONPATH": os.environ["SVC_P5_PYTHON"]})
        start(
            [sys.executable, script, b[0], str(b[1]), REDIS[0], str(REDIS[1]), pg_dsn, maria,
             log],
            "backend", b, env,
        )
    upstream_keepalive = "keepalive 16;" if keepalive == "1" else ""
    proxy_keepalive = (
        'proxy_http_version 1.1; proxy_set_header Connection "";' if keepalive == "1" else ""
    )
    conf = os.path.join(out, "nginx.conf")
    with open(conf, "w") as f:
        f.write(
            """
daemon off;
master_process off;
worker_processes 1;
pid %(out)s/nginx.pid;
error_log %(out)s/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %(out)s/body;
  proxy_temp_path %(out)s/proxy;
  fastcgi_temp_path %(out)s/fastcgi;
  uwsgi_temp_path %(out)s/uwsgi;
  scgi_temp_path %(out)s/scgi;
  upstream backends { server %(b1)s; server %(b2)s; %(ka)s }
  server {
    listen %(listen)s;
    keepalive_requests 100000;
    location / { proxy_pass http://backends; %(pka)s }
  }
}
"""
            % {
                "out": out,
                "b1": "%s:%d" % B1,
                "b2": "%s:%d" % B2,
                "ka": upstream_keepalive,
                "pka": proxy_keepalive,
                "listen": "%s:%d" % NGINX,
            }
        )
    start(["nginx", "-c", conf, "-p", out, "-e", os.path.join(out, "nginx-error.log")], "nginx", NGINX)
    client_args = [NGINX[0], str(NGINX[1]), clients, requests, log]
    if os.environ.get("SVC_C_CLIENT"):
        client = subprocess.run([os.environ["SVC_C_CLIENT"]] + client_args, env=instrumented_env())
    else:
        client = subprocess.run([sys.executable, os.path.join(here, "client.py")] + client_args)
    code = client.returncode
    # A process killed by a signal loses what its runtime recorded since the last flush
    # (every 20 ms): let the tiers ship their last requests before they are stopped.
    time.sleep(0.3)
finally:
    stop()
sys.exit(code)
