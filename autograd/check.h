// SF_CHECK and SF_EXPECT: one line for a check, so the checks do not hide the math.
//
// SF_CHECK: one line for an internal invariant, in the spirit of nanoGPT's
// `assert t <= block_size, f"..."`.
//
//     SF_CHECK(grad.shape() == x.shape(), "backward of ", name(), ": grad ", grad.shape(), " vs x ", x.shape());
//
// An invariant is something the code itself guarantees (a kernel's buffer sizes, a node's saved
// tensors): when it fails, the bug is ours, not the user's, so one line is enough. It throws
// std::logic_error("file:line: check failed: <condition>: <message>"). The message's parts are
// streamed one after another; a Shape prints as (2, 3). Mistakes a user can make (a bad config, a
// wrong shape passed to an op) keep their full messages: what was expected, what was found, where.
//
// SF_EXPECT: one line for a mistake a user can make, with that full message:
//
//     SF_EXPECT(weight.dim() == 2, "linear: expected weight of shape (out, in), got ", weight.shape());
//
// throws std::invalid_argument("linear: expected weight of shape (out, in), got (3, 4, 5)"): the
// message alone, streamed the same way, since it names the op and what went wrong.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/tensor.h"

namespace sf::detail {

inline void stream_part(std::ostringstream& os, const Shape& shape) { os << shape_str(shape); }
template <class T>
void stream_part(std::ostringstream& os, const T& part) {
  os << part;
}

template <class... Parts>
[[noreturn]] void check_failed(const char* condition, const char* file, int line, const Parts&... parts) {
  std::ostringstream os;
  os << file << ":" << line << ": check failed: " << condition;
  if constexpr (sizeof...(parts) > 0) {
    os << ": ";
    (stream_part(os, parts), ...);
  }
  throw std::logic_error(os.str());
}

template <class... Parts>
[[noreturn]] void expect_failed(const Parts&... parts) {
  std::ostringstream os;
  (stream_part(os, parts), ...);
  throw std::invalid_argument(os.str());
}

}  // namespace sf::detail

#define SF_CHECK(condition, ...) \
  ((condition) ? void(0) : ::sf::detail::check_failed(#condition, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__))

#define SF_EXPECT(condition, ...) ((condition) ? void(0) : ::sf::detail::expect_failed(__VA_ARGS__))
