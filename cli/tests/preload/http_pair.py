"""An unmodified Python http.server, started as its own process, asked N times by
http.client from this process; prints "http_pair: N requests, K ok". The server is stopped
with SIGINT, which it handles by exiting normally (so its recording is flushed)."""
import http.client
import signal
import subprocess
import sys

# SIGINT stops the server: it must not inherit it ignored (as a background job's children do),
# and a handler here (not SIG_IGN) becomes the default in the child after exec.
signal.signal(signal.SIGINT, signal.default_int_handler)
n = int(sys.argv[1])
server = subprocess.Popen(
    [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
    stdout=subprocess.PIPE,
    text=True,
)
line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 41234 (http://...) ..."
port = int(line.split(" port ")[1].split()[0])
ok = 0
for i in range(n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/hello.txt")
    resp = conn.getresponse()
    body = resp.read()
    if resp.status == 200 and body == b"hello from http.server\n":
        ok += 1
    conn.close()
server.send_signal(signal.SIGINT)
try:
    server.communicate(timeout=10)
except subprocess.TimeoutExpired:
    server.kill()  # never leave it running: the recording waits for every descendant
    raise
print(f"http_pair: {n} requests, {ok} ok", flush=True)
