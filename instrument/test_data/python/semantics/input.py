#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""Decorators, descriptors and coroutines whose meaning instrumentation must keep (run me)."""
from __future__ import annotations
import asyncio
import contextlib
import dataclasses
import functools


class DictProperty(object):
    """A callable descriptor factory, as in bottle: wrapping its result in a function breaks it."""
    def __init__(self, attr, key=None, read_only=False):
        self.attr, self.key, self.read_only = attr, key, read_only

    def __call__(self, func):
        functools.update_wrapper(self, func, updated=[])
        self.getter, self.key = func, self.key or func.__name__
        return self

    def __get__(self, obj, cls):
        if obj is None:
            return self
        key, storage = self.key, getattr(obj, self.attr)
        if key not in storage:
            storage[key] = self.getter(obj)
        return storage[key]


def traced(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return ("traced", func(*args, **kwargs))
    return wrapper


def registry(func):
    REGISTERED.append(func.__name__)
    return func
REGISTERED = []


@dataclasses.dataclass(order=True)
class Point:
    x: int
    y: int = 0

    def norm(self):
        return abs(self.x) + abs(self.y)

    @functools.cached_property
    def double(self):
        return Point(2 * self.x, 2 * self.y)


class Request:
    def __init__(self):
        self.environ = {}

    @DictProperty('environ', 'request.json', read_only=True)
    def json(self):
        return {"ok": True}

    @property
    def size(self):
        return 3

    @size.setter
    def size(self, v):
        self.environ["size"] = v

    @classmethod
    def make(cls):
        return cls()

    @staticmethod
    def version():
        return 13

    @traced
    def wrapped(self, x):
        return x * 2
    @registry
    def registered(self):
        return "r"


def gen(n):
    for i in range(n):
        yield i
    return "done"


@contextlib.contextmanager
def managed(log):
    log.append("enter")
    yield "value"
    log.append("exit")


async def coro(x):
    await asyncio.sleep(0)
    return x + 1


async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@functools.singledispatch
def show(x):
    return "object"
@show.register
def _(x: int):
    return "int"


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

    async def collect():
        return [i async for i in agen(3)]
    print(asyncio.run(collect()))
    print(fib(20), fib.cache_info().hits > 0, show(1), show("s"))
    print(Request.wrapped.__name__, Request.json.__name__, Point.norm.__qualname__)


if __name__ == "__main__":
    main()
