"""A module with every kind of def."""
from __future__ import annotations
import p5
import socket
@p5.sensor(0x458c5d21a0704e62)
def plain(x):
    return x + 1


class Server:
    """A server."""
    def __init__(self, port):
        self.port = port
    __init__ = p5.sensor(0x431b55ea5b21e645)(__init__)
    @p5.sensor_under(0x40dfc90a20da1f9b, staticmethod)
    def version():
        return 1

    @p5.sensor(0xf6fe56e4f3494e99)     # handles one client
    async def handle(self, reader):
        data = await reader.read(10)
        return data
    @p5.sensor(0x2afffda555edd663)
    def items(self):
        for i in range(3):
            yield i
def tight(x):
    return x
x = 1; tight = p5.sensor(0x5c9e8d32b7ce802a)(tight)
class Tight:
    def a(self):
        return 1
    @p5.sensor_under(0xf649e45a4472a0f6, property)
    def b(self):
        return 2
    def c(self):
        return 3
    def d(self):
        return 4
    a = p5.sensor(0x5e157fafe55f5d8d)(a)
    limit = 5; d = p5.sensor(0x4e4a73fd4e95aa64)(d); c = p5.sensor(0x2409e9ab20047693)(c)
def last(x):
    return x
y = 2; last = p5.sensor(0xc3eac99e81b88390)(last)
