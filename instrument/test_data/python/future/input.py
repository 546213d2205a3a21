"""Docstring, then a __future__ import, then code with no blank line."""
from __future__ import annotations
def f(x: int) -> int:
    return x + 1
f = f
if __name__ == "__main__":
    print(f(1), f.__annotations__)
