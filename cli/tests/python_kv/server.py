"""A small key-value server: socketserver accepts the connection (the runtime never sees the
accept), the handler reads "PUT key value" / "GET key" lines and answers each with one line."""
import socketserver
import sys

STORE = {}


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        buf = b""
        while True:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.request.sendall(answer(line.decode()).encode() + b"\n")


def answer(line):
    parts = line.split(" ", 2)
    if parts[0] == "PUT" and len(parts) == 3:
        STORE[parts[1]] = parts[2]
        return "OK"
    if parts[0] == "GET" and len(parts) == 2:
        return STORE.get(parts[1], "MISSING")
    return "ERR"


def main():
    with socketserver.TCPServer(("127.0.0.1", 0), Handler) as server:
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        import os
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        server.handle_request()


if __name__ == "__main__":
    main()
