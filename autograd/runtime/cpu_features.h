// cpu_features: which bf16 matrix units this CPU has, read from CPUID at run time.
//
// bf16 ("brain float 16") is float32 with the low 16 bits of the mantissa cut off: the same
// 8-bit exponent (same range), 8 bits of precision instead of 24. Two kinds of CPU units
// multiply bf16 matrices and add the products into float32:
//
//   AMX-BF16     Intel Sapphire Rapids and later: tile registers (16 rows x 64 bytes) and one
//                instruction (TDPBF16PS) for a whole 16x16 block of C. Linux hands out the tile
//                state only on request (arch_prctl ARCH_REQ_XCOMP_PERM), which detection makes.
//   AVX512-BF16  AMD Zen 4, Intel Cooper Lake and later: VDPBF16PS, 16 float32 lanes, each adding
//                two bf16 products a[2i]*b[2i] + a[2i+1]*b[2i+1].
//
// The environment variable SCRATCHFORMER_BF16_UNITS can hide units the CPU has, never add one:
// "none" hides both (to see the error a CPU without them gives), "avx512-bf16" hides AMX.
#pragma once

#include <string>

namespace sf {

enum class Bf16Unit {
  None,        // neither: bf16 matrix products are refused with a one-line error
  Avx512Bf16,  // VDPBF16PS on zmm registers
  AmxBf16,     // AMX tiles (TDPBF16PS)
};

// The best unit this CPU and OS offer (AMX first), after SCRATCHFORMER_BF16_UNITS. Detected once.
Bf16Unit bf16_unit();
// "amx-bf16", "avx512-bf16" or "none".
const char* bf16_unit_name(Bf16Unit unit);
// What CPUID says, unit by unit, for error messages and logs:
// "AMX-BF16 no, AVX512-BF16 yes (CPUID leaf 7)".
std::string bf16_units_found();
// AVX512-BF16's VDPBF16PS is there (and not hidden by SCRATCHFORMER_BF16_UNITS = none): decoding's
// packed bf16 kernel (packed_linear.h) needs it. True on every CPU with AMX-BF16 so far.
bool has_avx512_bf16();
// Throws std::runtime_error naming `what` (e.g. "train.precision = \"bf16\"") and what the CPU
// lacks when bf16_unit() is None.
void require_bf16_unit(const std::string& what);

}  // namespace sf
