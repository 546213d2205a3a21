"""An HTTP/1.1 app on http.server: ThreadingHTTPServer, keep-alive, a handler answering
GET /item/<id> and POST /echo/<id> with the request id in the body (headers and body are two
writes, as http.server makes them). GET /quit stops it; it then waits for its handler threads."""
import http.server
import sys
import threading

from common import publish_port


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/quit":
            self.answer(b"bye\n")
            threading.Thread(target=self.server.shutdown).start()
            return
        self.answer(("item %s\n" % self.path.rsplit("/", 1)[-1]).encode())

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        self.answer(b"echo " + self.path.rsplit("/", 1)[-1].encode() + b" " + data + b"\n")

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = False  # server_close joins the handler threads
    block_on_close = True


def main():
    with Server(("127.0.0.1", 0), Handler) as server:
        publish_port(sys.argv[1], server.server_address[1])
        server.serve_forever(poll_interval=0.05)
    print("http_app: stopped", flush=True)


if __name__ == "__main__":
    main()
