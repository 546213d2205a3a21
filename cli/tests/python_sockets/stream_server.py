"""A line server on socketserver: ThreadingTCPServer (a thread per connection) with a
StreamRequestHandler that reads requests with rfile.readline() and answers each with one
wfile.write(). Serves `connections` connections, then waits for their threads and exits."""
import socketserver
import sys

from common import publish_port


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            line = self.rfile.readline()
            if not line:
                return
            # "REQ <id> <payload>" → "REP <id> <payload reversed>"
            _, rid, payload = line.decode().rstrip("\n").split(" ", 2)
            self.wfile.write(("REP %s %s\n" % (rid, payload[::-1])).encode())


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = False  # server_close joins the handler threads
    block_on_close = True


def main():
    port_file, connections = sys.argv[1], int(sys.argv[2])
    with Server(("127.0.0.1", 0), Handler) as server:
        publish_port(port_file, server.server_address[1])
        for _ in range(connections):
            server.handle_request()
    print("stream_server: served %d connections" % connections, flush=True)


if __name__ == "__main__":
    main()
