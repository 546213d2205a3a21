"""The key-value client: one connection, N requests, each answered before the next; prints
what it did so the test can compare with the recorded messages."""
import os
import socket
import sys
import time


def request(sock, line):
    sock.sendall(line.encode() + b"\n")
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("server closed early")
        reply += chunk
    return reply.decode().strip()


def main():
    port_file, n = sys.argv[1], int(sys.argv[2])
    deadline = time.time() + 20
    while not os.path.exists(port_file):
        if time.time() > deadline:
            raise SystemExit("no server")
        time.sleep(0.01)
    port = int(open(port_file).read())
    sock = socket.create_connection(("127.0.0.1", port))
    ok = 0
    for i in range(n):
        if request(sock, "PUT k%d v%d" % (i % 10, i)) == "OK":
            ok += 1
        if request(sock, "GET k%d" % (i % 10)) == "v%d" % i:
            ok += 1
    sock.close()
    print("requests %d answered %d" % (2 * n, ok))


if __name__ == "__main__":
    main()
