// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), so that any
// safetensors reader (Python `safetensors.numpy.load_file`, Rust, ...) can open them:
//
//   bytes 0..7      N, the header length, an unsigned 64-bit little-endian integer
//   bytes 8..8+N    the header, UTF-8 JSON (padded with spaces so the data starts 8-byte aligned):
//                     {"__metadata__": {"step": "1200", ...},          (string -> string, optional)
//                      "encoder.embed.weight": {"dtype": "F32", "shape": [8000, 256],
//                                               "data_offsets": [0, 8192000]}, ...}
//   bytes 8+N..     the data section: each tensor's values, row-major, little-endian, at
//                   [begin, end) counted from the start of the data section; the tensors tile the
//                   section exactly (no gaps, no overlaps), in the order they were saved.
// dtypes: "F32" (float32), "F64" (float64), "I64" (int64).
//
// Scratchformer adds one metadata key, "scratchformer.checksum" = "fnv1a64:<16 hex digits>", the
// FNV-1a 64-bit hash of the whole data section (bytes 8+N to the end of the file, exactly), so a
// corrupted or truncated checkpoint is reported instead of loaded. Other readers ignore it. The
// checksum is required: a file without one loads only if it declares itself written by another
// tool, "scratchformer.origin" = "external", and its data is then unverified
// (docs/checkpoint-format.md).
//
// Files are written atomically: to PATH.tmp, flushed and fsync'ed, then renamed over PATH, so a
// crash or a full disk during a save leaves the previous checkpoint intact.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace sf::train {

// A checkpoint that cannot be written or read; what() is one line: the file and what is wrong.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The metadata key holding the data-section checksum ("fnv1a64:0123456789abcdef").
inline constexpr const char* kChecksumKey = "scratchformer.checksum";
// The metadata key that says who wrote the file; kExternalOrigin ("external": another tool, such
// as tools/torch_model.py) is the only value that lets a file without a checksum load.
inline constexpr const char* kOriginKey = "scratchformer.origin";
inline constexpr const char* kExternalOrigin = "external";

// Writes `tensors` (in this order; names must be unique and not "__metadata__") and `metadata` to
// `path`, atomically (see above). Tensors may be views (non-contiguous): their values are written
// row-major. dtypes float32, float64 and int64 only. Any existing value of kChecksumKey in
// `metadata` is replaced by the checksum of what is written. Throws CheckpointError naming the
// file on any failure; the file at `path`, if any, is then untouched.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      std::map<std::string, std::string> metadata = {});

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;        // name -> tensor (contiguous, requires_grad false)
  std::vector<std::string> order;               // names in data-section order (= the save order)
  std::map<std::string, std::string> metadata;  // "__metadata__", including kChecksumKey if present
  bool checksum_verified = false;               // false only for an external file without a checksum
};

// Reads a safetensors file. Throws CheckpointError (one line: the path and what is wrong) for a
// missing or unreadable file, a file shorter than 8 bytes, a header length beyond the end of the
// file, a header that is not valid JSON or not the expected structure, a missing or unsupported
// dtype, a shape whose byte count differs from its data_offsets, offsets out of the data section,
// overlapping or leaving gaps, a checksum mismatch, and a missing checksum (unless kOriginKey is
// kExternalOrigin: then checksum_verified is false and the caller says so).
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace sf::train
