import socket


def serve(port):
    srv = socket.socket()
    srv.bind(("127.0.0.1", port))
    srv.listen()
    conn, addr = srv.accept()
    data = conn.recv(1024)
    conn.sendall(data)
    conn.close()
    srv.close()


def client(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.send(
        b"hello")
    return s.recv(5)
