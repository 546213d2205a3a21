"""Drives http_app with requests (urllib3 underneath): `threads` threads, each with its own
Session (one pooled keep-alive connection), alternate GET and POST `requests` times; then
GET /quit."""
import sys
import threading

import requests

from common import wait_port

answered = []


def session(port, name, n):
    base = "http://127.0.0.1:%d" % port
    ok = 0
    with requests.Session() as s:
        for i in range(n):
            rid = "%s-%d" % (name, i)
            if i % 2:
                r = s.post(base + "/echo/" + rid, data=b"data-" + rid.encode(), timeout=30)
                want = b"echo %s data-%s\n" % (rid.encode(), rid.encode())
            else:
                r = s.get(base + "/item/" + rid, timeout=30)
                want = b"item %s\n" % rid.encode()
            if r.status_code == 200 and r.content == want:
                ok += 1
    answered.append(ok)


def main():
    port_file, threads, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    port = wait_port(port_file)
    workers = [
        threading.Thread(target=session, args=(port, "client-%d" % k, n), name="client-%d" % k)
        for k in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    r = requests.get("http://127.0.0.1:%d/quit" % port, timeout=30)
    print("requests_client: %d requests, %d answered, quit %s" % (
        threads * n, sum(answered), "ok" if r.content == b"bye\n" else "failed"), flush=True)


if __name__ == "__main__":
    main()
