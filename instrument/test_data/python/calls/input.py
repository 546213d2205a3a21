import functools


@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Base:
    def hello(self):
        return "base"


class Child(Base):
    def hello(self):
        name = super().hello()
        return f"{name.upper()}-{len(name)=}"


print(fib(10), Child().hello(), sorted(
    [3, 1, 2]))
