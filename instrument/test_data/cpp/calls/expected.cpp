#include <memory>
#include <vector>
#include "p5.h"
static int &slot(std::vector<int> &v, int i) { P5_SCOPE(0xc96ce297d03f8258ULL); return v[static_cast<unsigned>(i)]; }
static std::unique_ptr<int> make(int x) { P5_SCOPE(0x9d56f82aa5c466baULL); return ([&]() -> decltype(auto) { P5_SCOPE(0x14741c9486bce8b2ULL); return std::make_unique<int>(x); }()); }

int run()
{ P5_SCOPE(0xf4672455574bd911ULL);
    std::vector<int> v(3);
    ([&]() -> decltype(auto) { P5_SCOPE(0x426b68cea357ab21ULL); return slot(v, 1); }()) = 7;
    auto p = ([&]() -> decltype(auto) { P5_SCOPE(0x4f1929f920a528beULL); return make(([&]() -> decltype(auto) { P5_SCOPE(0x5bc8eb239df60c5bULL); return slot(v, 1); }())); }());
    static_assert(sizeof(int) == 4, "int");
    decltype(make(0)) q = ([&]() -> decltype(auto) { P5_SCOPE(0x6876ac4e1b4389f8ULL); return std::move(p); }());
    return *q;
}
