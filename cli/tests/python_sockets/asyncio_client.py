"""Drives asyncio_server from one event loop: `tasks` concurrent tasks, each on its own
connection (asyncio.open_connection), send `requests` lines and await each reply."""
import asyncio
import sys

from common import wait_port


async def session(port, name, requests):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ok = 0
    for i in range(requests):
        rid = "%s-%d" % (name, i)
        payload = "payload-%04d" % i
        writer.write(("REQ %s %s\n" % (rid, payload)).encode())
        await writer.drain()
        if (await reader.readline()).decode() == "REP %s %s\n" % (rid, payload[::-1]):
            ok += 1
    writer.close()
    await writer.wait_closed()
    return ok


async def main():
    port_file, tasks, requests = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    port = wait_port(port_file)
    got = await asyncio.gather(*(session(port, "task-%d" % k, requests) for k in range(tasks)))
    print("asyncio_client: %d requests, %d answered" % (tasks * requests, sum(got)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
