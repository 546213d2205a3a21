"""Docstring, then a __future__ import, then code with no blank line."""
from __future__ import annotations; import p5
def f(x: int) -> int:
    return x + 1
f = f; f = p5.sensor(0xa6f4e003060bb3e0)(f)
if __name__ == "__main__":
    print(f(1), f.__annotations__)
