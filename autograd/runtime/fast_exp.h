// fast_exp: exp for float32 that the compiler can vectorise, for softmax and cross-entropy.
//
// Why not std::exp? Each std::exp(float) is a call into glibc (__expf_fma). A call inside a
// loop stops GCC from vectorising it; glibc's vector expf (libmvec) is only declared to GCC
// under -ffast-math, which this project does not use (it would also reorder our sums). So a
// softmax row of 8000 logits paid 8000 scalar calls. fast_exp below is plain inline arithmetic
// (multiplies, adds, integer shifts, selects), so `#pragma omp simd` over a loop of it becomes
// AVX-512 code computing 16 exps per instruction stream.
//
// The method, in four steps (the same as Cephes' expf and most vector math libraries):
//
// 1. Range reduction. exp(x) = 2^n * exp(r) with n = round(x / ln 2) and r = x - n ln 2, so
//    |r| <= ln(2)/2 ~ 0.347. A polynomial can only be accurate on a short interval; this turns
//    the whole float range into that short interval plus an exact power of two.
//    n is rounded with the "magic number" trick: adding 1.5 * 2^23 to x/ln2 pushes the fraction
//    bits out of the float, so the hardware's round-to-nearest does the rounding, and the low
//    bits of the sum's bit pattern hold n as an integer.
//    r is computed as (x - n*kLn2Hi) - n*kLn2Lo (Cody and Waite): kLn2Hi holds only the top 9
//    bits of ln 2, so n*kLn2Hi (n has at most 8 bits) is exact and so is the subtraction; the
//    tiny remainder kLn2Lo carries the rest of ln 2. With one constant, n*ln2 would be rounded
//    and that rounding (up to ~128 * 3e-8) would land in r, i.e. in the result.
//
// 2. The polynomial. On |r| <= 0.347, exp(r) = 1 + r + r^2 (c2 + c3 r + c4 r^2 + c5 r^3 + c6 r^4),
//    a degree-6 polynomial whose first two coefficients are exactly 1 (so p(0) = 1 and small r
//    are exact to first order). c2..c6 are a Chebyshev fit (nearly minimax) of (exp(r) - 1 - r)/r^2
//    made with mpmath.chebyfit at 40 digits; its error, 6.5e-8 on a function of size 0.5, is
//    multiplied by r^2 <= 0.12, so the polynomial itself is good to ~1e-8 relative: the float
//    roundings of the evaluation (Horner's rule, ~0.5 ulp for the final 1 + ...) dominate.
//
// 3. 2^n from bits. A float is sign | 8 exponent bits (biased by 127) | 23 fraction bits, so
//    the float with bit pattern (n + 127) << 23 is exactly 2^n for -126 <= n <= 127. n reaches
//    128 near the top of the range (exp(88.7) ~ 2^128 * 0.99), so we split n = n1 + n2 with
//    both halves in [-63, 64] and multiply by 2^n1 and then 2^n2: both products are exact.
//
// 4. The ends, by selects (no branches, so the loop still vectorises):
//      x > 88.72283172607421875 (the largest float whose exp is finite)  -> +inf (and +inf -> +inf)
//      x < -87.33654 (about ln of FLT_MIN, the smallest normal float)     -> 0   (and -inf -> 0)
//      NaN -> NaN (comparisons with NaN are false, so NaN flows through the arithmetic)
//    Below ln(FLT_MIN) exact exp would be a denormal (down to 2^-149 at x ~ -103.3); we return 0
//    instead, an absolute error below 1.2e-38. Every caller adds these values to a sum whose
//    largest term is 1 (softmax subtracts the row max), where they could not show anyway, and
//    denormal arithmetic can be slow.
//
// Accuracy, measured against std::exp computed in double and rounded to float, over EVERY float
// in [kFastExpMinArg, kFastExpMaxArg] (2.2e9 inputs, a scratch program looping over all bit
// patterns): never more than 1 ulp (one float step) from the correctly rounded result; 0.77% of
// the inputs are 1 ulp off, the rest exact; 1.08 ulp from the exact value at worst. That was
// the -O3 -march=native build, where GCC fuses a*b + c into one FMA instruction (its default
// for C++); the same sweep without FMA instructions (-march=x86-64-v2) gave the same bound
// (max 1 ulp from the rounded result, 0.81% of inputs 1 ulp off, 1.05 ulp from exact at worst).
// tests/test_fast_exp.cpp checks the 1-ulp bound (kFastExpMaxUlp) on a dense sweep.
//
// The naive reference is std::exp; the float64 paths of the kernels keep using it.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace sf {

// Range of fast_exp (see step 4 above).
inline constexpr float kFastExpMaxArg = 88.72283172607421875f;  // exp(this) ~ 3.4028e38 < FLT_MAX
inline constexpr float kFastExpMinArg = -87.33654475f;          // ~ ln(FLT_MIN) = ln(2^-126)

inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;   // 1 / ln 2
  constexpr float kRoundShift = 12582912.0f;       // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kLn2Hi = 0.693359375f;           // ln 2 to 9 bits: 355 / 512
  constexpr float kLn2Lo = -2.12194440e-4f;        // ln 2 - kLn2Hi
  constexpr float kC2 = 0.5f;                      // Chebyshev fit of (exp(r) - 1 - r) / r^2
  constexpr float kC3 = 0.16666577756404877f;      //   on [-ln2/2, ln2/2], coefficients of
  constexpr float kC4 = 0.041666556149721146f;     //   r^0 .. r^4 (a Taylor series would have
  constexpr float kC5 = 0.008363173343241215f;     //   1/2, 1/6, 1/24, 1/120, 1/720: close,
  constexpr float kC6 = 0.0013926175888627768f;    //   but 4x less accurate at the ends)

  // Clamp so the arithmetic below stays finite; the ends are fixed up at the bottom.
  float xc = x < kFastExpMinArg ? kFastExpMinArg : x;
  xc = xc > kFastExpMaxArg ? kFastExpMaxArg : xc;

  // 1. n = round(x / ln 2), as a float and as an integer; r = x - n ln 2 in [-0.347, 0.347].
  const float shifted = xc * kLog2e + kRoundShift;  // the rounding to an integer happens here
  const float n = shifted - kRoundShift;
  const auto ni = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(shifted) -
                                            std::bit_cast<std::uint32_t>(kRoundShift));
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;

  // 2. exp(r) = 1 + r + r^2 q(r), q by Horner's rule.
  const float q = (((kC6 * r + kC5) * r + kC4) * r + kC3) * r + kC2;
  const float p = 1.0f + (r + (r * r) * q);

  // 3. 2^n = 2^n1 * 2^n2 with n1, n2 in [-63, 64], each built from its exponent bits.
  const std::int32_t n1 = ni >> 1, n2 = ni - n1;
  const float scale1 = std::bit_cast<float>(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float scale2 = std::bit_cast<float>(static_cast<std::uint32_t>(n2 + 127) << 23);
  float result = p * scale1 * scale2;

  // 4. The ends: underflow to 0 (also -inf), overflow to +inf (also +inf); NaN stays NaN.
  result = x < kFastExpMinArg ? 0.0f : result;
  result = x > kFastExpMaxArg ? std::numeric_limits<float>::infinity() : result;
  return result;
}

}  // namespace sf
