#include <memory>
#include <vector>

static int &slot(std::vector<int> &v, int i) { return v[static_cast<unsigned>(i)]; }
static std::unique_ptr<int> make(int x) { return std::make_unique<int>(x); }

int run()
{
    std::vector<int> v(3);
    slot(v, 1) = 7;
    auto p = make(slot(v, 1));
    static_assert(sizeof(int) == 4, "int");
    decltype(make(0)) q = std::move(p);
    return *q;
}
