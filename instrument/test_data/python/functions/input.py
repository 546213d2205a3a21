"""A module with every kind of def."""
from __future__ import annotations

import socket

def plain(x):
    return x + 1


class Server:
    """A server."""
    def __init__(self, port):
        self.port = port

    @staticmethod
    def version():
        return 1

    # handles one client
    async def handle(self, reader):
        data = await reader.read(10)
        return data

    def items(self):
        for i in range(3):
            yield i
def tight(x):
    return x
x = 1
