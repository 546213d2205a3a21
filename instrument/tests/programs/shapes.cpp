// p5-instrument end-to-end program: methods, constructors, an exception through a sensor.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace geo {

class Shape {
public:
    explicit Shape(int s) : side_(s) {}
    int area() const { return side_ * side_; }
    int checked(int limit) const
    {
        if (area() > limit)
            throw std::runtime_error("too big");
        return area();
    }

private:
    int side_;
};

} // namespace geo

static int safe(const geo::Shape &s, int limit)
{
    try {
        return s.checked(limit);
    } catch (const std::exception &) {
        return -1;
    }
}

int main()
{
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    geo::Shape a(3), b(20);
    std::string msg = std::to_string(safe(a, 100)) + " " + std::to_string(safe(b, 100));
    write(fds[1], msg.data(), msg.size());
    char buf[64];
    ssize_t n = read(fds[0], buf, sizeof buf);
    std::printf("%.*s\n", static_cast<int>(n), buf);
    close(fds[0]);
    close(fds[1]);
    return 0;
}
