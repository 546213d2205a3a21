"""An unmodified nginx (the Debian package) proxying to an unmodified Python http.server,
asked N times by http.client from this process; prints "nginx_pair: N requests, K ok".
nginx runs in the foreground with one worker and a configuration in the current directory;
it is stopped with SIGQUIT (graceful: its processes exit normally), the backend with SIGINT.
"""
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

# SIGINT stops the server: it must not inherit it ignored (as a background job's children do),
# and a handler here (not SIG_IGN) becomes the default in the child after exec.
signal.signal(signal.SIGINT, signal.default_int_handler)
n = int(sys.argv[1])
here = os.getcwd()
nginx = shutil.which("nginx") or "/usr/sbin/nginx"
backend = subprocess.Popen(
    [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
    stdout=subprocess.PIPE,
    text=True,
)
backend_port = int(backend.stdout.readline().split(" port ")[1].split()[0])
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
os.makedirs(os.path.join(here, "tmp"), exist_ok=True)
with open(os.path.join(here, "nginx.conf"), "w") as f:
    f.write(f"""
daemon off;
master_process on;
worker_processes 1;
user root;
pid {here}/nginx.pid;
error_log {here}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {here}/tmp;
    proxy_temp_path {here}/tmp;
    fastcgi_temp_path {here}/tmp;
    uwsgi_temp_path {here}/tmp;
    scgi_temp_path {here}/tmp;
    server {{
        listen 127.0.0.1:{port};
        location / {{ proxy_pass http://127.0.0.1:{backend_port}; }}
    }}
}}
""")
proxy = subprocess.Popen(
    [nginx, "-e", f"{here}/error.log", "-p", here, "-c", f"{here}/nginx.conf"]
)
for _ in range(500):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.02)
ok = 0
for i in range(n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/hello.txt")
    resp = conn.getresponse()
    body = resp.read()
    if resp.status == 200 and body == b"hello from http.server\n":
        ok += 1
    conn.close()
proxy.send_signal(signal.SIGQUIT)
try:
    proxy.wait(timeout=20)
except subprocess.TimeoutExpired:
    proxy.kill()
    backend.kill()
    raise
backend.send_signal(signal.SIGINT)
try:
    backend.communicate(timeout=10)
except subprocess.TimeoutExpired:
    backend.kill()  # never leave it running: the recording waits for every descendant
    raise
print(f"nginx_pair: {n} requests, {ok} ok", flush=True)
