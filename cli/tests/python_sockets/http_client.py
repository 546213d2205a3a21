"""Drives http_app with http.client: `threads` threads, each on one keep-alive connection,
alternate GET and POST `requests` times; then GET /quit (urllib.request, its own
connection)."""
import http.client
import sys
import threading
import urllib.request

from common import wait_port

answered = []


def session(port, name, requests):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    ok = 0
    for i in range(requests):
        rid = "%s-%d" % (name, i)
        if i % 2:
            conn.request("POST", "/echo/" + rid, body=b"data-" + rid.encode())
            want = b"echo %s data-%s\n" % (rid.encode(), rid.encode())
        else:
            conn.request("GET", "/item/" + rid)
            want = b"item %s\n" % rid.encode()
        resp = conn.getresponse()
        if resp.status == 200 and resp.read() == want:
            ok += 1
    conn.close()
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
    with urllib.request.urlopen("http://127.0.0.1:%d/quit" % port, timeout=30) as r:
        bye = r.read() == b"bye\n"
    print("http_client: %d requests, %d answered, quit %s" % (
        threads * requests, sum(answered), "ok" if bye else "failed"), flush=True)


if __name__ == "__main__":
    main()
