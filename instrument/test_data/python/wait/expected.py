import select
import selectors
import socket
import p5
@p5.sensor(0xa32c4121178d3b67)
def wait_once(sock, timeout):
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    ready = p5.comm(0xa2049a0dd5972b07, sel, "select")(timeout)
    r, _, _ = p5.comm(0xaeb45b3852e80ea4, select, "select")([sock], [], [], timeout)
    p = p5.comm(0x88a717b8daf8c9cd, select, "poll")()
    p.register(sock, select.POLLIN)
    events = p5.comm(0x9556d8e35849ad6a, p, "poll")(int(timeout * 1000))
    p5.comm(0xd4bf9eb7cad3ed7b, sel, "close")()
    return len(ready) + len(r) + len(events)


if __name__ == "__main__":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    print(wait_once(s, 0.01))
