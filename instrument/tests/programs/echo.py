"""p5-instrument end-to-end program: plain, early-return, generator and async functions."""
import asyncio
import socket


def square(x):
    return x * x


def classify(v):
    if v < 0:
        return -1
    if v == 0:
        return 0
    return 2 if square(v) > 100 else 1


def count(n):
    for i in range(n):
        yield i


async def later(x):
    await asyncio.sleep(0)
    return x + 1


def exchange():
    a, b = socket.socketpair()
    # p5:begin ping
    a.sendall(b"ping")
    data = b.recv(16)
    # p5:end
    a.close()
    b.close()
    with open(__file__) as f:
        f.close()
    return len(data)


class Box:

    @staticmethod
    def make():
        return Box()

    def total(self):
        return sum(count(3))


if __name__ == "__main__":
    print(classify(-3), classify(0), classify(12), Box.make().total(), asyncio.run(later(1)),
          exchange())
