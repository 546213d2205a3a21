import select
import selectors
import socket


def wait_once(sock, timeout):
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    ready = sel.select(timeout)
    r, _, _ = select.select([sock], [], [], timeout)
    p = select.poll()
    p.register(sock, select.POLLIN)
    events = p.poll(int(timeout * 1000))
    sel.close()
    return len(ready) + len(r) + len(events)


if __name__ == "__main__":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    print(wait_once(s, 0.01))
