// safetensors reading and writing (the format is described in safetensors.h).
//
// Saving: make each tensor contiguous, hash the data, build the JSON header, then write
// length + header + data to PATH.tmp, fflush + fsync, and rename it over PATH (rename is atomic on
// POSIX file systems: PATH is always either the old file or the complete new one).
//
// Loading checks the header completely (types, dtypes, shapes against offsets, offsets tiling the
// data section) before allocating any tensor, so a damaged file can never make us allocate more
// than the file holds or read past its end.
#include "train/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

namespace sf::train {
namespace {

// safetensors stores little-endian bytes; we write and read memory as it is.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian machine");

using Json = nlohmann::ordered_json;  // keeps keys in insertion order: tensors in save order

struct DtypeCode {
  Dtype dtype;
  const char* code;
};
constexpr DtypeCode kDtypeCodes[] = {{Dtype::Float32, "F32"}, {Dtype::Float64, "F64"}, {Dtype::Int64, "I64"}};

const char* dtype_code(Dtype dtype) {
  for (const DtypeCode& d : kDtypeCodes)
    if (d.dtype == dtype) return d.code;
  return nullptr;
}

bool dtype_from_code(const std::string& code, Dtype& dtype) {
  for (const DtypeCode& d : kDtypeCodes)
    if (code == d.code) return dtype = d.dtype, true;
  return false;
}

// FNV-1a, 64 bits: h = (h XOR byte) * prime for each byte. Not cryptographic; it catches flipped
// bits and truncation, which is all a checkpoint needs.
struct Fnv1a64 {
  std::uint64_t h = 14695981039346656037ull;  // offset basis
  void update(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 1099511628211ull;  // FNV prime
    }
  }
  std::string text() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

bool is_external(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find(kOriginKey);
  return it != metadata.end() && it->second == kExternalOrigin;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw CheckpointError(path + ": " + what); }

std::string errno_text() { return std::strerror(errno); }

// ---- saving ----

// Writes length + header + data to the open `f` (the file `tmp`), flushes, fsyncs and closes it.
void write_data(const std::string& path, const std::string& tmp, File& f, const std::string& header,
                const std::vector<Tensor>& data) {
  auto write = [&](const void* p, std::size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f.get()) != n) fail(path, "cannot write " + tmp + ": " + errno_text());
  };
  const std::uint64_t header_len = header.size();
  write(&header_len, sizeof header_len);
  write(header.data(), header.size());
  for (const Tensor& t : data) write(t.raw_data(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  if (std::fflush(f.get()) != 0) fail(path, "cannot write " + tmp + ": " + errno_text());
  if (::fsync(::fileno(f.get())) != 0) fail(path, "cannot sync " + tmp + " to disk: " + errno_text());
  std::FILE* raw = f.release();
  if (std::fclose(raw) != 0) fail(path, "cannot close " + tmp + ": " + errno_text());
}

// Creates `tmp` and writes the checkpoint into it. Throws with the system's reason on failure,
// after deleting the half-written `tmp` (but never something it did not create).
void write_file(const std::string& path, const std::string& tmp, const std::string& header,
                const std::vector<Tensor>& data) {
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) fail(path, "cannot create " + tmp + ": " + errno_text());
  try {
    write_data(path, tmp, f, header, data);
  } catch (...) {
    f.reset();
    ::unlink(tmp.c_str());
    throw;
  }
}

// After a rename, fsync the folder so the new directory entry itself survives a power cut.
// Best effort: the file is already complete and in place.
void sync_parent_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// ---- loading ----

// A JSON number that is a non-negative integer, as uint64.
bool get_u64(const Json& j, std::uint64_t& out) {
  if (j.is_number_unsigned()) return out = j.get<std::uint64_t>(), true;
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return out = j.get<std::uint64_t>(), true;
  return false;
}

// One tensor's header entry, checked.
struct Entry {
  std::string name;
  Dtype dtype;
  Shape shape;
  std::uint64_t begin, end;  // byte offsets in the data section
};

// Checks one "name": {"dtype", "shape", "data_offsets"} entry against a data section of
// `data_size` bytes.
Entry read_entry(const std::string& path, const std::string& name, const Json& j, std::uint64_t data_size) {
  const std::string where = "tensor \"" + name + "\": ";
  if (!j.is_object()) fail(path, where + "expected an object with dtype, shape and data_offsets");

  Entry e{name, Dtype::Float32, {}, 0, 0};
  if (!j.contains("dtype")) fail(path, where + "missing dtype");
  if (!j["dtype"].is_string()) fail(path, where + "dtype must be a string");
  const std::string code = j["dtype"].get<std::string>();
  if (!dtype_from_code(code, e.dtype))
    fail(path, where + "unsupported dtype \"" + code + "\" (expected F32, F64 or I64)");

  if (!j.contains("shape") || !j["shape"].is_array()) fail(path, where + "missing shape (an array of sizes)");
  // nbytes = element size * the sizes. `extent` is the same product with sizes of 0 taken as 1: it
  // must fit in int64 even when nbytes is 0, because a tensor's strides are products of its
  // trailing sizes (shape [0, 2^32, 2^32] holds no bytes but has a stride of 2^64). nbytes <=
  // extent, so it cannot overflow either.
  std::uint64_t nbytes = dtype_size(e.dtype), extent = nbytes;
  for (const Json& s : j["shape"]) {
    std::uint64_t n = 0;
    if (!get_u64(s, n) || n > static_cast<std::uint64_t>(INT64_MAX))
      fail(path, where + "shape entries must be non-negative integers, got " + j["shape"].dump());
    if (__builtin_mul_overflow(extent, std::max<std::uint64_t>(n, 1), &extent) ||
        extent > static_cast<std::uint64_t>(INT64_MAX))
      fail(path, where + "shape " + j["shape"].dump() + " is too large");
    nbytes *= n;
    e.shape.push_back(static_cast<std::int64_t>(n));
  }

  const Json& off = j.contains("data_offsets") ? j["data_offsets"] : Json();
  if (!off.is_array() || off.size() != 2 || !get_u64(off[0], e.begin) || !get_u64(off[1], e.end) || e.begin > e.end)
    fail(path, where + "data_offsets must be [begin, end] with 0 <= begin <= end");
  if (e.end > data_size)
    fail(path, where + "data_offsets " + off.dump() + " reach beyond the data section (" + std::to_string(data_size) +
                   " bytes): the file is truncated or damaged");
  if (e.end - e.begin != nbytes)
    fail(path, where + "shape " + shape_str(e.shape) + " of " + code + " needs " + std::to_string(nbytes) +
                   " bytes but data_offsets " + off.dump() + " hold " + std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      std::map<std::string, std::string> metadata) {
  // 1. The data: each tensor row-major (contiguous() copies only views that need it), hashed.
  std::vector<Tensor> data;
  std::set<std::string> names;
  Json entries = Json::object();
  Fnv1a64 hash;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) fail(path, "cannot save tensor \"" + name + "\": it is undefined");
    if (name == "__metadata__") fail(path, "cannot save a tensor named \"__metadata__\" (reserved by the format)");
    if (!names.insert(name).second) fail(path, "cannot save two tensors named \"" + name + "\"");
    const char* code = dtype_code(tensor.dtype());
    if (!code)
      fail(path, "cannot save tensor \"" + name + "\": dtype " + dtype_name(tensor.dtype()) +
                     " is not supported (float32, float64, int64)");
    Tensor c = tensor.detach().contiguous();
    const std::uint64_t nbytes = static_cast<std::uint64_t>(c.numel()) * dtype_size(c.dtype());
    hash.update(c.raw_data(), nbytes);
    entries[name] = {{"dtype", code}, {"shape", c.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(c);
  }

  // 2. The header: metadata (with the checksum) first, then the tensors in order, padded with
  // spaces so the data section starts at a multiple of 8 bytes (as the reference writer does).
  metadata[kChecksumKey] = hash.text();
  Json header = Json::object();
  header["__metadata__"] = metadata;
  for (auto& [name, entry] : entries.items()) header[name] = entry;
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("cannot encode the header (names and metadata must be UTF-8): ") + e.what());
  }
  while ((8 + header_text.size()) % 8 != 0) header_text += ' ';

  // 3. Write to PATH.tmp, then rename over PATH.
  const std::string tmp = path + ".tmp";
  write_file(path, tmp, header_text, data);  // on failure the old file at `path` was never touched
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    fail(path, "cannot rename " + tmp + " to it: " + reason);
  }
  sync_parent_dir(path);
}

namespace {

// __metadata__: an object of strings.
std::map<std::string, std::string> read_metadata(const std::string& path, const Json& value) {
  if (!value.is_object()) fail(path, "__metadata__ must be an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) fail(path, "__metadata__ value for \"" + key + "\" must be a string, got " + v.dump());
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

// The tensors must tile the data section: sorted by offset, each starts where the last ended.
// (stable: empty tensors sharing an offset keep their header order)
void sort_and_check_tiling(const std::string& path, std::vector<Entry>& entries, std::uint64_t data_size) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t expected = 0;
  for (const Entry& e : entries) {
    if (e.begin < expected) fail(path, "tensor \"" + e.name + "\": data_offsets overlap the previous tensor's");
    if (e.begin > expected)
      fail(path, "tensor \"" + e.name + "\": gap of " + std::to_string(e.begin - expected) + " bytes before its data");
    expected = e.end;
  }
  if (expected != data_size)
    fail(path, "the tensors cover " + std::to_string(expected) + " bytes of data but the file holds " +
                   std::to_string(data_size) + ": truncated or damaged");
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, errno == ENOENT ? "checkpoint file not found" : "cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) != 0) fail(path, "cannot stat: " + errno_text());
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, expected a .safetensors file");
  const std::uint64_t file_size = static_cast<std::uint64_t>(st.st_size);
  auto read = [&](void* p, std::size_t n, const char* what) {
    if (n > 0 && std::fread(p, 1, n, f.get()) != n)
      fail(path, std::string("file ended while reading ") + what + " (truncated or changed while reading)");
  };

  // 1. Header length and header.
  if (file_size < 8)
    fail(path, "file is " + std::to_string(file_size) + " bytes, too short to hold the 8-byte header length");
  std::uint64_t header_len = 0;
  read(&header_len, 8, "the header length");
  if (header_len > file_size - 8)
    fail(path, "header length " + std::to_string(header_len) + " is larger than the rest of the file (" +
                   std::to_string(file_size - 8) + " bytes): not a safetensors file, or truncated");
  std::string header_text(header_len, '\0');
  read(header_text.data(), header_len, "the header");
  Json header;
  try {
    header = Json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    fail(path, "malformed JSON header: " + what);
  }
  if (!header.is_object()) fail(path, "malformed header: expected a JSON object, got " + std::string(header.type_name()));

  // 2. Check every entry before allocating anything.
  const std::uint64_t data_size = file_size - 8 - header_len;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      out.metadata = read_metadata(path, value);
      continue;
    }
    entries.push_back(read_entry(path, name, value, data_size));
  }
  sort_and_check_tiling(path, entries, data_size);

  // 3. Read the data, in file order, hashing as we go.
  std::string recorded;
  if (auto it = out.metadata.find(kChecksumKey); it != out.metadata.end()) {
    recorded = it->second;
    if (recorded.rfind("fnv1a64:", 0) != 0) fail(path, "unknown checksum \"" + recorded + "\" (expected fnv1a64:...)");
  } else if (!is_external(out.metadata)) {
    fail(path, std::string("no checksum: metadata key \"") + kChecksumKey + "\" is missing (a file written by another tool " +
                   "loads unverified only if its metadata says \"" + kOriginKey + "\": \"" + kExternalOrigin + "\")");
  }
  Fnv1a64 hash;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    const std::size_t nbytes = e.end - e.begin;
    read(t.raw_data(), nbytes, ("tensor \"" + e.name + "\"").c_str());
    hash.update(t.raw_data(), nbytes);
    out.tensors[e.name] = t;
    out.order.push_back(e.name);
  }
  if (!recorded.empty() && hash.text() != recorded)
    fail(path, "checksum mismatch: the data hashes to " + hash.text() + " but the header records " + recorded +
                   " (the file is corrupted)");
  out.checksum_verified = !recorded.empty();
  return out;
}

}  // namespace sf::train
