"""Drives stream_server: `threads` threads, each on its own connection, send `requests`
lines with sock.sendall and read each reply through sock.makefile("rb").readline()."""
import socket
import sys
import threading

from common import wait_port

answered = []


def session(port, name, requests):
    sock = socket.create_connection(("127.0.0.1", port))
    rfile = sock.makefile("rb")
    ok = 0
    for i in range(requests):
        rid = "%s-%d" % (name, i)
        payload = "payload-%04d" % i
        sock.sendall(("REQ %s %s\n" % (rid, payload)).encode())
        if rfile.readline().decode() == "REP %s %s\n" % (rid, payload[::-1]):
            ok += 1
    rfile.close()
    sock.close()
    answered.append(ok)


def main():
    port_file, threads, requests = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    port = wait_port(port_file)
    workers = [
        threading.Thread(target=session, args=(port, "client-%d" % k, requests),
                         name="client-%d" % k)
        for k in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print("stream_client: %d requests, %d answered" % (threads * requests, sum(answered)),
          flush=True)


if __name__ == "__main__":
    main()
