import socket

import p5
def serve(port):
    srv = socket.socket()
    srv.bind(("127.0.0.1", port))
    srv.listen()
    conn, addr = p5.comm(0x8a77e951281aede7, srv, "accept")()
    data = p5.comm(0x9725aa7ba5686b84, conn, "recv")(1024)
    p5.comm(0x711866fc2d7926ad, conn, "sendall")(data)
    p5.comm(0x7dc82826aaca0a4a, conn, "close")()
    p5.comm(0xbd32edfb1d57b05b, srv, "close")()


def client(port):
    s = socket.create_connection(("127.0.0.1", port))
    p5.comm(0xae1de46c48e5d7a1, s, "send")(
        b"hello")
    return p5.comm(0xbacda596c636bb3e, s, "recv")(5)
