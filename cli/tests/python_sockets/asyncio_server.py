"""A line server on asyncio streams (asyncio.start_server, the selector event loop): each
connection's requests read with reader.readline(), each answered with writer.write() and
drain(). Stops after `connections` connections have closed."""
import asyncio
import sys

from common import publish_port


async def main():
    port_file, connections = sys.argv[1], int(sys.argv[2])
    done = asyncio.Event()
    closed = 0

    async def handle(reader, writer):
        nonlocal closed
        while True:
            line = await reader.readline()
            if not line:
                break
            _, rid, payload = line.decode().rstrip("\n").split(" ", 2)
            writer.write(("REP %s %s\n" % (rid, payload[::-1])).encode())
            await writer.drain()
        writer.close()
        await writer.wait_closed()
        closed += 1
        if closed == connections:
            done.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    publish_port(port_file, server.sockets[0].getsockname()[1])
    async with server:
        await done.wait()
    print("asyncio_server: served %d connections" % connections, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
