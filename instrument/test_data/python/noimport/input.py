if True:
    def area(side):
        return side * side

    x = 1
if __name__ == "__main__":
    print(area(3))
