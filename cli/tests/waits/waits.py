"""Waits the Python client records: an instrumented selector's select and select.select on an
idle socket (50 ms timeouts each), and asyncio's event loop idle in its selector for 150 ms
(recorded by the client's selector wrapper, no instrumented call site)."""
import asyncio
import select
import selectors
import socket


def idle_waits(sock):
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    ready = sel.select(0.05)
    r, _, _ = select.select([sock], [], [], 0.05)
    sel.close()
    return len(ready) + len(r)


async def pause():
    await asyncio.sleep(0.15)


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    n = idle_waits(sock)
    asyncio.run(pause())
    sock.close()
    print("ready %d" % n)


if __name__ == "__main__":
    main()
