// classes, namespaces, lambdas
#include <cstddef>
#include <string>
#include <unistd.h>
#include "p5.h"
namespace net {

class Conn {
public:
    explicit Conn(int fd) : fd_(fd) { P5_SCOPE(0xe8510479365916bfULL);}
    ~Conn() { P5_SCOPE(0x1f1184c29af1904dULL); ::p5_close(0x75efddfca76e0ed9ULL, fd_); }
    std::size_t push(const std::string &s)
    { P5_SCOPE(0x444884ef9e3656c5ULL);
        ssize_t n = ::p5_write(0x15ee7163bdc8f941ULL, fd_, s.data(), s.size());
        return n < 0 ? 0 : static_cast<std::size_t>(n);
    }
    constexpr static int twice(int x) { return 2 * x; }
    int fd() const;

private:
    int fd_;
};

int Conn::fd() const
{ P5_SCOPE(0xf2997ca59087aa37ULL);
    auto add = [](int a, int b) { return a + b; };
    return add(fd_, 0);
}

} // namespace net

template <typename T> T ident(T v) { P5_SCOPE(0x6438c24988a680bcULL); return v; }

int main()
{ P5_SCOPE(0x9ca596375c333983ULL);
    net::Conn c(1);
    return static_cast<int>(c.push("hi")) - 2 + ident(0) + net::Conn::twice(0);
}
