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
    @staticmethod
    def version():
        return 1
    version = p5.sensor(0x40dfc90a20da1f9b)(version)
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
x = 1
