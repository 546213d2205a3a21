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
class Tight:
    def a(self):
        return 1
    @property
    def b(self):
        return 2
    def c(self):
        return 3
    def d(self):
        return 4

    limit = 5
def last(x):
    return x
y = 2
