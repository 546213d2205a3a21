// classes, namespaces, lambdas
#include <cstddef>
#include <string>
#include <unistd.h>

namespace net {

class Conn {
public:
    explicit Conn(int fd) : fd_(fd) {}
    ~Conn() { ::close(fd_); }
    std::size_t push(const std::string &s)
    {
        ssize_t n = ::write(fd_, s.data(), s.size());
        return n < 0 ? 0 : static_cast<std::size_t>(n);
    }
    constexpr static int twice(int x) { return 2 * x; }
    int fd() const;

private:
    int fd_;
};

int Conn::fd() const
{
    auto add = [](int a, int b) { return a + b; };
    return add(fd_, 0);
}

} // namespace net

template <typename T> T ident(T v) { return v; }

int main()
{
    net::Conn c(1);
    return static_cast<int>(c.push("hi")) - 2 + ident(0) + net::Conn::twice(0);
}
