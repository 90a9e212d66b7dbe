// cpu_features: see cpu_features.h.
#include "autograd/runtime/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>

namespace sf {

namespace {

// CPUID bits (Intel SDM vol. 2, CPUID leaf 07H; AMD APM vol. 3 agrees for the ones Zen 4 has).
constexpr unsigned kLeaf7Ebx_Avx512F = 1u << 16;
constexpr unsigned kLeaf7Ebx_Avx512BW = 1u << 30;
constexpr unsigned kLeaf7Ebx_Avx512VL = 1u << 31;
constexpr unsigned kLeaf7Edx_AmxBf16 = 1u << 22;
constexpr unsigned kLeaf7Edx_AmxTile = 1u << 24;
constexpr unsigned kLeaf7Sub1Eax_Avx512Bf16 = 1u << 5;
constexpr unsigned kLeaf1Ecx_Osxsave = 1u << 27;
// XCR0 bits: the OS saves these register states on a context switch.
constexpr std::uint64_t kXcr0_Avx512 = (1u << 1) | (1u << 2) | (0x7u << 5);  // SSE, AVX, opmask + zmm
constexpr std::uint64_t kXcr0_Amx = (1u << 17) | (1u << 18);                // XTILECFG, XTILEDATA

// Linux (5.16+): ask for the AMX tile data state (arch/x86/include/uapi/asm/prctl.h).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

struct CpuidBits {
  bool avx512 = false;       // AVX-512 F, BW, VL and the OS saves zmm state
  bool avx512_bf16 = false;  // CPUID says AVX512-BF16
  bool amx = false;          // AMX-TILE and AMX-BF16, the OS saves tile state
  bool amx_permitted = false;
};

std::uint64_t read_xcr0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

CpuidBits read_cpuid() {
  CpuidBits bits;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & kLeaf1Ecx_Osxsave)) return bits;
  const std::uint64_t xcr0 = read_xcr0();
  if (__get_cpuid_max(0, nullptr) < 7) return bits;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const unsigned leaf7_ebx = ebx, leaf7_edx = edx;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const unsigned leaf7_sub1_eax = eax;
  bits.avx512 = (leaf7_ebx & kLeaf7Ebx_Avx512F) && (leaf7_ebx & kLeaf7Ebx_Avx512BW) &&
                (leaf7_ebx & kLeaf7Ebx_Avx512VL) && (xcr0 & kXcr0_Avx512) == kXcr0_Avx512;
  bits.avx512_bf16 = bits.avx512 && (leaf7_sub1_eax & kLeaf7Sub1Eax_Avx512Bf16);
  bits.amx = (leaf7_edx & kLeaf7Edx_AmxTile) && (leaf7_edx & kLeaf7Edx_AmxBf16) && (xcr0 & kXcr0_Amx) == kXcr0_Amx;
  if (bits.amx) bits.amx_permitted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return bits;
}

const CpuidBits& cpuid_bits() {
  static const CpuidBits bits = read_cpuid();
  return bits;
}

// The unit CPUID offers, before SCRATCHFORMER_BF16_UNITS.
Bf16Unit detected_unit() {
  const CpuidBits& b = cpuid_bits();
  if (b.amx && b.amx_permitted) return Bf16Unit::AmxBf16;
  if (b.avx512_bf16) return Bf16Unit::Avx512Bf16;
  return Bf16Unit::None;
}

Bf16Unit unit_after_environment() {
  Bf16Unit unit = detected_unit();
  const char* env = std::getenv("SCRATCHFORMER_BF16_UNITS");
  if (!env || !*env) return unit;
  const std::string value = env;
  if (value == "none") return Bf16Unit::None;
  if (value == "avx512-bf16") return cpuid_bits().avx512_bf16 ? Bf16Unit::Avx512Bf16 : Bf16Unit::None;
  if (value == "amx-bf16") return unit;  // the default: AMX if present
  throw std::runtime_error("SCRATCHFORMER_BF16_UNITS: expected none, avx512-bf16 or amx-bf16, got '" + value + "'");
}

}  // namespace

Bf16Unit bf16_unit() {
  static const Bf16Unit unit = unit_after_environment();
  return unit;
}

bool has_avx512_bf16() { return bf16_unit() != Bf16Unit::None && cpuid_bits().avx512_bf16; }

const char* bf16_unit_name(Bf16Unit unit) {
  switch (unit) {
    case Bf16Unit::AmxBf16: return "amx-bf16";
    case Bf16Unit::Avx512Bf16: return "avx512-bf16";
    case Bf16Unit::None: return "none";
  }
  return "none";
}

std::string bf16_units_found() {
  const CpuidBits& b = cpuid_bits();
  std::string amx = b.amx ? (b.amx_permitted ? "yes" : "yes, but Linux refused its tile state") : "no";
  std::string s = "AMX-BF16 " + amx + ", AVX512-BF16 " + (b.avx512_bf16 ? "yes" : "no") + " (CPUID leaf 7)";
  const char* env = std::getenv("SCRATCHFORMER_BF16_UNITS");
  if (env && *env) s += "; SCRATCHFORMER_BF16_UNITS=" + std::string(env);
  return s;
}

void require_bf16_unit(const std::string& what) {
  if (bf16_unit() != Bf16Unit::None) return;
  throw std::runtime_error(what + " needs a CPU with bf16 matrix units, AMX-BF16 or AVX512-BF16; this one has " +
                           "neither: " + bf16_units_found() + ". Use float32 on this machine");
}

}  // namespace sf
