class Shape:
    """A shape; the module begins with a class and has no blank line before it."""
    def area(self):
        return 0

    def name(self):
        return type(self).__name__
class Square(Shape):
    def __init__(self, side):
        self.side = side
    def area(self):
        return self.side * self.side
if __name__ == "__main__":
    print(Square(3).area(), Shape().area(), Square(1).name(), "p5" in vars(Shape))
