#pragma once
// Random numbers: ms::Generator (xoshiro256** seeded through splitmix64), its
// uniform/normal/integer draws written by hand so that one seed gives the same
// numbers with every compiler and standard library, and the process-wide default
// generator (ms::default_generator(), ms::manual_seed). Must not know about tensors;
// the random creation ops (ops/factory.hpp) draw from here.
//
// Reproducibility: next_u64, uniform and randint are bit-exact on every platform.
// normal() uses std::log/std::sqrt/std::cos/std::sin, which the C libraries in
// use round correctly or within one ulp, so normals agree to about 1e-15 relative.

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <limits>
#include <mutex>
#include <type_traits>

#include "dtype.hpp"
#include "error.hpp"

namespace ms {

/// A seedable 64-bit pseudo-random generator (xoshiro256**, period 2^256 - 1).
/// A plain value: copy it to save its state, assign it back to restore. Not
/// thread-safe by itself; the default generator is guarded by a mutex.
class Generator {
 public:
  /// The seed a generator (and the default generator) starts from when none is given.
  static constexpr std::uint64_t kDefaultSeed = 67280421310721ull;

  explicit Generator(std::uint64_t seed = kDefaultSeed) { this->seed(seed); }

  /// Restarts the sequence from `seed`.
  void seed(std::uint64_t seed) {
    initial_seed_ = seed;
    std::uint64_t x = seed;
    for (auto& w : s_) w = splitmix64(x);
    has_cached_normal_ = false;
    cached_normal_ = 0;
  }
  /// The seed passed to the last seed() (or the constructor).
  std::uint64_t initial_seed() const { return initial_seed_; }

  /// The next 64 random bits.
  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// The next 32 random bits (the high half of next_u64, the better-mixed one).
  std::uint32_t next_u32() { return static_cast<std::uint32_t>(next_u64() >> 32); }

  /// Uniform double in [0, 1): the top 53 bits of next_u64 times 2^-53.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  /// Uniform float in [0, 1): the top 24 bits of next_u64 times 2^-24.
  float uniform_float() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  /// Uniform value of floating type T in [0, 1) on a grid of 2^-digits(T), so that
  /// rounding to T can never produce 1 (float16: 11 bits, bfloat16: 8 bits).
  template <class T>
  T uniform_as() {
    constexpr int d = std::numeric_limits<T>::digits;
    static_assert(d > 0 && d <= 53, "uniform_as: T must be a floating type of at most 53 mantissa bits");
    return static_cast<T>(static_cast<double>(next_u64() >> (64 - d)) * std::ldexp(1.0, -d));
  }

  /// Standard normal (mean 0, variance 1) by the Box-Muller transform. Draws come in
  /// pairs: the second value of a pair is cached and returned by the next call.
  double normal() {
    if (has_cached_normal_) {
      has_cached_normal_ = false;
      return cached_normal_;
    }
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    const double u1 = 1.0 - uniform();  // (0, 1]: log(u1) is finite
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = kTwoPi * u2;
    cached_normal_ = r * std::sin(theta);
    has_cached_normal_ = true;
    return r * std::cos(theta);
  }
  /// Normal with the given mean and standard deviation.
  double normal(double mean, double stddev) { return mean + stddev * normal(); }

  /// Uniform integer in [0, n) without modulo bias (rejection sampling); n must be > 0.
  std::uint64_t below(std::uint64_t n) {
    // Values below `threshold` would make the low residues more likely; 2^64 mod n of them.
    const std::uint64_t threshold = (0 - n) % n;
    for (;;) {
      const std::uint64_t x = next_u64();
      if (x >= threshold) return x % n;
    }
  }
  /// Uniform integer in [low, high); throws ValueError when low >= high.
  std::int64_t randint(std::int64_t low, std::int64_t high) {
    MS_CHECK(low < high, ValueError, "randint: low ({}) must be less than high ({})", low, high);
    const std::uint64_t span = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + below(span));
  }

  /// The full state: four xoshiro words (the cached Box-Muller value is part of a copy, not of this).
  std::array<std::uint64_t, 4> state() const { return s_; }
  /// Replaces the four state words; throws ValueError for the all-zero state xoshiro cannot leave.
  void set_state(const std::array<std::uint64_t, 4>& s) {
    MS_CHECK(s[0] | s[1] | s[2] | s[3], ValueError, "Generator::set_state: the all-zero state is invalid");
    s_ = s;
    has_cached_normal_ = false;
  }

  friend bool operator==(const Generator&, const Generator&) = default;

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static constexpr std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  std::array<std::uint64_t, 4> s_{};
  std::uint64_t initial_seed_ = kDefaultSeed;
  double cached_normal_ = 0;
  bool has_cached_normal_ = false;
};

/// Exclusive access to a generator for as long as the handle lives:
/// `ms::default_generator()->uniform()` or `auto g = ms::default_generator(); g->normal(); ...`.
/// Do not call random ops (ms::rand, ...) while holding one: they lock the same mutex.
class LockedGenerator {
 public:
  LockedGenerator(std::mutex& mu, Generator& gen) : lock_(mu), gen_(&gen) {}
  Generator* operator->() const { return gen_; }
  Generator& operator*() const { return *gen_; }

 private:
  std::unique_lock<std::mutex> lock_;
  Generator* gen_;
};

namespace detail {
/// The documented piece of global mutable state: the process-wide generator and its mutex.
struct DefaultGeneratorSlot {
  std::mutex mu;
  Generator gen;
};
inline DefaultGeneratorSlot& default_generator_slot() {
  static auto* slot = new DefaultGeneratorSlot();  // never destroyed: usable during static destruction
  return *slot;
}
}  // namespace detail

/// The process-wide generator that ms::rand/randn/randint draw from (seeded with
/// Generator::kDefaultSeed at start-up), locked for the lifetime of the returned handle.
inline LockedGenerator default_generator() {
  auto& slot = detail::default_generator_slot();
  return LockedGenerator(slot.mu, slot.gen);
}

/// Calls f(generator): a local generator seeded with `seed` when there is one (a random op
/// with a "seed" attribute), else the process-wide default generator, locked for the call.
template <class F>
void with_generator(std::optional<std::int64_t> seed, F&& f) {
  if (seed) {
    Generator g(static_cast<std::uint64_t>(*seed));
    f(g);
  } else {
    auto g = default_generator();
    f(*g);
  }
}

/// Reseeds the default generator (like torch.manual_seed / mindspore.set_seed).
inline void manual_seed(std::uint64_t seed) { default_generator()->seed(seed); }

}  // namespace ms
