def work(xs):
    total = 0
    # p5:begin loop
    for x in xs:
        if x < 0:
            return -1
        total += x
    total *= 2
    # p5:end
    return total


def ranged(a):
    b = a + 1
    b *= 2
    b -= 3
    return b


def misplaced(a):
    if a:
    # p5:begin bad
        a += 1
    # p5:end
    return a
