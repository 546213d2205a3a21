def work(xs):
    total = 0
    p5.enter(0xa5d3e1ae53bd1127)  # p5:begin loop
    for x in xs:
        if x < 0:
            p5.exit(0xa5d3e1ae53bd1127); return -1
        total += x
    p5.mark(0x0b806eddadc6b5e8); total *= 2
    p5.exit(0xa5d3e1ae53bd1127)  # p5:end
    return total
import p5; work = p5.sensor(0x2db0254df0612693)(work)
@p5.sensor(0x401b54476858a8c9)
def ranged(a):
    b = a + 1
    p5.enter(0xc397728f9e5a5021); p5.mark(0x72d5811c83e82ae6); b *= 2
    p5.mark(0x6625bff206974749); b -= 3; p5.exit(0xc397728f9e5a5021)
    return b

@p5.sensor(0xea1d54a57ed43f54)
def misplaced(a):
    if a:
    # p5:begin bad
        a += 1
    # p5:end
    return a
