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

}  // namespace sf::detail

#define SF_CHECK(condition, ...) \
  ((condition) ? void(0) : ::sf::detail::check_failed(#condition, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__))
