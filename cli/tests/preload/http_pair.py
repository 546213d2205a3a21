"""An unmodified Python http.server, started as its own process, asked N times by
http.client from this process; prints "http_pair: N requests, K ok". The server is stopped
with SIGINT, which it handles by exiting normally (so its recording is flushed)."""
import http.client
import signal
import subprocess
import sys

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
server.communicate(timeout=10)
print(f"http_pair: {n} requests, {ok} ok", flush=True)
