import functools


@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else p5.call(0xbd1e0ff6fa19182d, fib)(n - 1) + p5.call(0xc9cbd121776695ca, fib)(n - 2)


class Base:
    def hello(self):
        return "base"


class Child(Base):
    def hello(self):
        name = p5.call(0xaac6dab638229f42, super().hello)()
        return f"{name.upper()}-{len(name)=}"

import p5
p5.call(0xacb098787fbc15ec, print)(p5.call(0xa002d74e026e984f, fib)(10), p5.call(0x93531623851db4b2, p5.call(0x86a354f907ccd115, Child)().hello)(), p5.call(0xdf6b9d2274f8d860, sorted)(
    [3, 1, 2]))
