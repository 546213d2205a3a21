#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""Decorators, descriptors and coroutines whose meaning instrumentation must keep (run me)."""
from __future__ import annotations
import asyncio
import contextlib
import dataclasses
import functools

import p5
class DictProperty(object):
    """A callable descriptor factory, as in bottle: wrapping its result in a function breaks it."""
    def __init__(self, attr, key=None, read_only=False):
        self.attr, self.key, self.read_only = attr, key, read_only
    __init__ = p5.sensor(0x082c6fd2a6dd3197)(__init__)
    def __call__(self, func):
        functools.update_wrapper(self, func, updated=[])
        self.getter, self.key = func, self.key or func.__name__
        return self
    __call__ = p5.sensor(0x2f8f84c55a5beb99)(__call__)
    def __get__(self, obj, cls):
        if obj is None:
            return self
        key, storage = self.key, getattr(obj, self.attr)
        if key not in storage:
            storage[key] = self.getter(obj)
        return storage[key]
    __get__ = p5.sensor(0x000858658d0dd305)(__get__)
@p5.sensor(0x34feec81c366fc2d)
def traced(func):
    @p5.sensor_under(0x96c53e49b5df3e2e, functools.wraps(func))
    def wrapper(*args, **kwargs):
        return ("traced", func(*args, **kwargs))
    return wrapper

@p5.sensor(0xdba5b72030ec515d)
def registry(func):
    REGISTERED.append(func.__name__)
    return func
REGISTERED = []


@dataclasses.dataclass(order=True)
class Point:
    x: int
    y: int = 0
    @p5.sensor(0xd94ef2313523af32)
    def norm(self):
        return abs(self.x) + abs(self.y)

    @p5.sensor_under(0xdbe78b7f2d36833b, functools.cached_property)
    def double(self):
        return Point(2 * self.x, 2 * self.y)


class Request:
    def __init__(self):
        self.environ = {}
    __init__ = p5.sensor(0xae1ef0739c53c085)(__init__)
    @p5.sensor_under(0x8cfd03f6fa3ba395, DictProperty('environ', 'request.json', read_only=True))
    def json(self):
        return {"ok": True}

    @p5.sensor_under(0x113e03d20dac4da4, property)
    def size(self):
        return 3

    @p5.sensor_under(0x048e42a7905b6a07, size.setter)
    def size(self, v):
        self.environ["size"] = v

    @p5.sensor_under(0x85b4b1cb434bfe8d, classmethod)
    def make(cls):
        return cls()

    @p5.sensor_under(0x43c58d44a245c0db, staticmethod)
    def version():
        return 13

    @p5.sensor_under(0x9eb4b6b0560219e0, traced)
    def wrapped(self, x):
        return x * 2
    @p5.sensor_under(0x5c2362c53f593e9f, registry)
    def registered(self):
        return "r"

@p5.sensor(0x9aea005e8bfbff7c)
def gen(n):
    for i in range(n):
        yield i
    return "done"


@p5.sensor_under(0xb9596145a59eab4d, contextlib.contextmanager)
def managed(log):
    log.append("enter")
    yield "value"
    log.append("exit")

@p5.sensor(0x7aa97115cc9d54d3)
async def coro(x):
    await asyncio.sleep(0)
    return x + 1

@p5.sensor(0x2fc5b1397dacb785)
async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


@p5.sensor_under(0xa964b7f264f40f3d, functools.lru_cache(maxsize=None))
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@p5.sensor_under(0x4cd309a8f36b5f6f, functools.singledispatch)
def show(x):
    return "object"
@p5.sensor_under(0xc62963fd797d1da5, show.register)
def _(x: int):
    return "int"

@p5.sensor(0x3c697614b2aca96b)
def main():
    r = Request()
    print(r.json, type(Request.__dict__["json"]).__name__)
    print(r.size, Request.make().version(), r.wrapped(4), REGISTERED)
    r.size = 5
    print(r.environ)
    p = Point(3, -4)
    print(p.norm(), p.double, p.double is p.double, Point(1) < Point(2), dataclasses.fields(Point)[0].name)
    g = gen(3)
    print(list(g), type(gen(1)).__name__)
    log = []
    with managed(log) as v:
        log.append(v)
    print(log)
    print(asyncio.run(coro(1)))
    @p5.sensor(0x53036dc2263cf8e7)
    async def collect():
        return [i async for i in agen(3)]
    print(asyncio.run(collect()))
    print(fib(20), fib.cache_info().hits > 0, show(1), show("s"))
    print(Request.wrapped.__name__, Request.json.__name__, Point.norm.__qualname__)


if __name__ == "__main__":
    main()
