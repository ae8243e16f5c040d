// Tests of ms::Generator and the default generator (core/random.hpp): pinned values for
// seed 42 (the same on every platform), statistics of 100k draws, state save/restore.

#include <cmath>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace {

struct Moments {
  double mean = 0, var = 0, lo = 0, hi = 0;
};
template <class F>
Moments moments(int n, F&& draw) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = draw();
  Moments m;
  m.lo = m.hi = v[0];
  for (double x : v) {
    m.mean += x;
    m.lo = std::min(m.lo, x);
    m.hi = std::max(m.hi, x);
  }
  m.mean /= n;
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= n - 1;
  return m;
}

}  // namespace

TEST_CASE("Generator: seed 42 gives pinned bits and uniforms", "[random]") {
  ms::Generator g(42);
  // xoshiro256** seeded by splitmix64(42), checked against an independent implementation.
  CHECK(g.next_u64() == 0x15780b2e0c2ec716ull);
  CHECK(g.next_u64() == 0x6104d9866d113a7eull);
  CHECK(g.next_u64() == 0xae17533239e499a1ull);
  CHECK(g.next_u64() == 0xecb8ad4703b360a1ull);

  g.seed(42);  // uniform() is exact: 53 bits times 2^-53
  CHECK(g.uniform() == 0.083862971059882163);
  CHECK(g.uniform() == 0.37898025066266861);
  CHECK(g.uniform() == 0.68004341102813937);
  CHECK(g.uniform() == 0.92469294532538759);

  g.seed(42);
  CHECK(g.uniform_float() == 0.0838629603f);
  CHECK(g.uniform_float() == 0.378980219f);
  CHECK(g.uniform_float() == 0.680043399f);
  CHECK(g.initial_seed() == 42);
}

TEST_CASE("Generator: seed 42 gives pinned normals and integers", "[random]") {
  ms::Generator g(42);
  // Box-Muller goes through libm's log/sqrt/cos/sin: equal to ~1 ulp across C libraries.
  const double expected[] = {-0.30326306467873798, 0.28846173882942383, 1.3438117634372806, -0.6879751798977497};
  for (double e : expected) CHECK(g.normal() == Approx(e).epsilon(1e-14));

  g.seed(42);
  const std::int64_t ints[] = {2, 2, 9, 3, 6, 4};
  for (auto e : ints) CHECK(g.randint(0, 10) == e);

  g.seed(42);  // the full int64 range does not overflow
  CHECK(g.randint(INT64_MIN, INT64_MAX) == -7676373272452217066LL);
  CHECK(g.randint(INT64_MIN, INT64_MAX) == -2232420343890232706LL);
}

TEST_CASE("Generator: the default seed is fixed", "[random]") {
  ms::Generator a, b(ms::Generator::kDefaultSeed);
  CHECK(a.next_u64() == 0xc991a3f2dae735abull);
  CHECK(b.next_u64() == 0xc991a3f2dae735abull);
}

TEST_CASE("Generator: uniform statistics over 100k draws", "[random]") {
  ms::Generator g(7);
  auto m = moments(100000, [&] { return g.uniform(); });
  CHECK(m.lo >= 0.0);
  CHECK(m.hi < 1.0);
  CHECK(m.mean == Approx(0.5).margin(0.005));        // sd of the mean: 0.29 / sqrt(1e5) = 0.0009
  CHECK(m.var == Approx(1.0 / 12).margin(0.002));

  auto mf = moments(100000, [&] { return static_cast<double>(g.uniform_float()); });
  CHECK(mf.lo >= 0.0);
  CHECK(mf.hi < 1.0);
  CHECK(mf.mean == Approx(0.5).margin(0.005));
}

TEST_CASE("Generator: normal statistics over 100k draws", "[random]") {
  ms::Generator g(11);
  auto m = moments(100000, [&] { return g.normal(); });
  CHECK(m.mean == Approx(0.0).margin(0.015));  // sd of the mean: 0.0032
  CHECK(m.var == Approx(1.0).margin(0.02));
  CHECK(m.lo < -3.5);  // tails exist
  CHECK(m.hi > 3.5);
  CHECK(std::isfinite(m.lo));
  CHECK(std::isfinite(m.hi));
  auto m2 = moments(100000, [&] { return g.normal(10.0, 2.0); });
  CHECK(m2.mean == Approx(10.0).margin(0.03));
  CHECK(m2.var == Approx(4.0).margin(0.1));
}

TEST_CASE("Generator: randint is uniform and within bounds", "[random]") {
  ms::Generator g(3);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) {
    auto v = g.randint(-3, 4);
    REQUIRE(v >= -3);
    REQUIRE(v < 4);
    ++counts[static_cast<std::size_t>(v + 3)];
  }
  for (int c : counts) CHECK(c == Approx(10000).margin(400));  // sd ~93
  CHECK(g.randint(5, 6) == 5);
  MS_REQUIRE_THROWS_MSG(g.randint(3, 3), ms::ValueError, "[ms.value_error] randint: low (3) must be less than high (3)");
}

TEST_CASE("Generator: uniform_as<T> never rounds up to 1", "[random]") {
  ms::Generator g(5);
  for (int i = 0; i < 20000; ++i) {
    REQUIRE(static_cast<float>(g.uniform_as<ms::half>()) < 1.0f);
    REQUIRE(static_cast<float>(g.uniform_as<ms::bfloat16>()) < 1.0f);
    REQUIRE(g.uniform_as<float>() < 1.0f);
  }
  // The largest draw on the half grid is 1 - 2^-11, exactly representable.
  ms::Generator h(5);
  float mx = 0;
  for (int i = 0; i < 50000; ++i) mx = std::max(mx, static_cast<float>(h.uniform_as<ms::half>()));
  CHECK(mx == 1.0f - 0x1p-11f);
}

TEST_CASE("Generator: copies save and restore the state", "[random]") {
  ms::Generator g(99);
  g.normal();  // leaves a cached second value
  ms::Generator saved = g;
  std::vector<double> a, b;
  for (int i = 0; i < 5; ++i) a.push_back(g.normal());
  g = saved;
  for (int i = 0; i < 5; ++i) b.push_back(g.normal());
  CHECK(a == b);

  ms::Generator s(1);
  auto st = s.state();
  auto x = s.next_u64();
  s.set_state(st);
  CHECK(s.next_u64() == x);
  MS_REQUIRE_THROWS_MSG(s.set_state({0, 0, 0, 0}), ms::ValueError,
                        "[ms.value_error] Generator::set_state: the all-zero state is invalid");
  // seed() also drops a cached normal, so a reseed always restarts the same sequence.
  ms::Generator p(8), q(8);
  p.normal();
  p.seed(8);
  CHECK(p.normal() == q.normal());
}

TEST_CASE("default_generator: manual_seed restarts it, it is shared and locked", "[random]") {
  ms::manual_seed(42);
  CHECK(ms::default_generator()->initial_seed() == 42);
  CHECK(ms::default_generator()->next_u64() == 0x15780b2e0c2ec716ull);
  ms::manual_seed(42);
  {
    auto g = ms::default_generator();  // hold the lock for several draws
    CHECK(g->next_u64() == 0x15780b2e0c2ec716ull);
    CHECK((*g).next_u64() == 0x6104d9866d113a7eull);
  }
  // Concurrent draws from several threads lose nothing: together they consume the sequence.
  ms::manual_seed(1);
  std::vector<std::uint64_t> expect;
  {
    ms::Generator ref(1);
    for (int i = 0; i < 4000; ++i) expect.push_back(ref.next_u64());
  }
  std::vector<std::vector<std::uint64_t>> got(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) got[static_cast<std::size_t>(t)].push_back(ms::default_generator()->next_u64());
    });
  for (auto& th : ts) th.join();
  std::vector<std::uint64_t> all;
  for (auto& v : got) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::sort(expect.begin(), expect.end());
  CHECK(all == expect);
}
