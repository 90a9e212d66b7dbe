// Tests for train/safetensors: round trips of every dtype (views and 0-d tensors included), the
// exact byte layout of a small file, reading a file written by hand as another library would,
// and every way a checkpoint can be damaged: each must give a one-line CheckpointError, never a
// crash, and a failed save must leave the previous checkpoint intact.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_util.h"
#include "train/checkpoint/safetensors.h"

namespace {

namespace fs = std::filesystem;
using Catch::Contains;
using sf::Dtype;
using sf::Tensor;
using sf::train::CheckpointError;
using sf::train::load_safetensors;
using sf::train::save_safetensors;

using sf::test::read_file;   // tests/test_util.h
using sf::test::TempDir;
using sf::test::write_file;

// n as 8 little-endian bytes, written out byte by byte (independent of the machine's byte order).
std::string u64_le(std::uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file as another writer would make it: length, JSON header as given, data.
std::string raw_file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

// FNV-1a 64 of `bytes` as "fnv1a64:<hex>", computed here independently of the library.
std::string fnv1a64(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Loading `path` must throw a one-line CheckpointError that names the file and contains `part`.
void require_load_error(const std::string& path, const std::string& part) {
  REQUIRE_THROWS_AS(load_safetensors(path), CheckpointError);
  REQUIRE_THROWS_WITH(load_safetensors(path), Contains(path) && Contains(part) && !Contains("\n"));
}

}  // namespace

TEST_CASE("safetensors round trip keeps names dtypes shapes and values", "[checkpoint][safetensors]") {
  sf::Generator gen(7);
  const Tensor f32 = sf::randn({2, 3}, gen, Dtype::Float32);
  Tensor f64 = sf::randn({4}, gen, Dtype::Float64);
  f64.requires_grad_();  // a parameter: saved without its autograd state
  const Tensor i64 = sf::from_vector<std::int64_t>({0, -5, 1LL << 40, 7, INT64_MAX, INT64_MIN}, {3, 2});
  const Tensor base = sf::randn({3, 5}, gen, Dtype::Float32);
  const Tensor view = base.transpose(0, 1).narrow(0, 1, 3);  // (3, 3) view, not contiguous
  REQUIRE_FALSE(view.is_contiguous());
  const Tensor scalar = sf::scalar_tensor(-2.75, Dtype::Float64);  // 0-d
  const Tensor empty = sf::zeros({0, 4}, Dtype::Float32);

  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  save_safetensors(path, {{"f32", f32}, {"f64", f64}, {"ids", i64}, {"view", view}, {"scalar", scalar}, {"empty", empty}});
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const sf::train::SafetensorsFile file = load_safetensors(path);

  CHECK(file.order == std::vector<std::string>{"f32", "f64", "ids", "view", "scalar", "empty"});
  REQUIRE(file.tensors.size() == 6);
  for (const std::string& name : file.order) {
    INFO("tensor " << name);
    const Tensor& t = file.tensors.at(name);
    CHECK(t.is_contiguous());
    CHECK_FALSE(t.requires_grad());
  }
  // Bits are stored, so values come back exactly.
  CHECK(file.tensors.at("f32").dtype() == Dtype::Float32);
  CHECK(file.tensors.at("f32").shape() == sf::Shape{2, 3});
  CHECK(file.tensors.at("f32").to_vector<float>() == f32.to_vector<float>());
  CHECK(file.tensors.at("f64").dtype() == Dtype::Float64);
  CHECK(file.tensors.at("f64").to_vector<double>() == f64.to_vector<double>());
  CHECK(file.tensors.at("ids").dtype() == Dtype::Int64);
  CHECK(file.tensors.at("ids").shape() == sf::Shape{3, 2});
  CHECK(file.tensors.at("ids").to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, -5, 1LL << 40, 7, INT64_MAX, INT64_MIN});
  // The view is stored row-major as the view sees it: element (i, j) is base[j][1 + i].
  const std::vector<float> b = base.to_vector<float>();
  std::vector<float> expected_view;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) expected_view.push_back(b[j * 5 + 1 + i]);
  CHECK(file.tensors.at("view").shape() == sf::Shape{3, 3});
  CHECK(file.tensors.at("view").to_vector<float>() == expected_view);
  CHECK(file.tensors.at("scalar").dim() == 0);
  CHECK(file.tensors.at("scalar").item() == -2.75);
  CHECK(file.tensors.at("empty").shape() == sf::Shape{0, 4});
}

TEST_CASE("safetensors keeps metadata and adds the checksum", "[checkpoint][safetensors]") {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const std::map<std::string, std::string> metadata{
      {"step", "1200"}, {"config", "[model]\nd_model = 256\n"}, {"note", "Grüße \"quoted\" \\ 中文"}, {"empty", ""}};
  save_safetensors(path, {{"x", sf::ones({2})}}, metadata);
  const auto loaded = load_safetensors(path).metadata;
  for (const auto& [key, value] : metadata) {
    INFO("key " << key);
    REQUIRE(loaded.count(key) == 1);
    CHECK(loaded.at(key) == value);
  }
  CHECK(loaded.size() == metadata.size() + 1);
  CHECK_THAT(loaded.at(sf::train::kChecksumKey), Catch::StartsWith("fnv1a64:"));
}

TEST_CASE("safetensors writes the documented byte layout", "[checkpoint][safetensors]") {
  TempDir dir;
  const std::string path = dir / "tiny.safetensors";
  save_safetensors(path, {{"w", sf::from_vector<float>({1.0f, -2.0f}, {2})}, {"n", sf::from_vector<std::int64_t>({7}, {})}},
                   {{"k", "v"}});

  // Data: 1.0f = 0x3F800000 and -2.0f = 0xC0000000 as little-endian float32, then 7 as int64.
  const std::string data = std::string("\x00\x00\x80\x3F" "\x00\x00\x00\xC0", 8) + std::string("\x07\0\0\0\0\0\0\0", 8);
  std::string header = R"({"__metadata__":{"k":"v","scratchformer.checksum":")" + fnv1a64(data) +
                       R"("},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("n":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})";
  while ((8 + header.size()) % 8 != 0) header += ' ';  // the data section starts 8-byte aligned
  const std::string bytes = read_file(path);
  CHECK(bytes == u64_le(header.size()) + header + data);
  CHECK(bytes.size() % 8 == 0);
}

TEST_CASE("safetensors reads a file written by another library", "[checkpoint][safetensors]") {
  // No checksum but "scratchformer.origin": "external", keys in another order, "b" stored before
  // "a", trailing spaces.
  TempDir dir;
  const std::string path = dir / "foreign.safetensors";
  const std::string header = R"({"a":{"data_offsets":[4,12],"shape":[1],"dtype":"F64"},)"
                             R"("__metadata__":{"scratchformer.origin":"external"},)"
                             R"("b":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}   )";
  const std::string data = std::string("\x00\x00\x00\x3F", 4) + std::string("\0\0\0\0\0\0\xF8\x3F", 8);  // 0.5f, 1.5
  write_file(path, raw_file(header, data));
  const auto file = load_safetensors(path);
  CHECK(file.order == std::vector<std::string>{"b", "a"});  // the order of the data
  CHECK(file.tensors.at("a").dtype() == Dtype::Float64);
  CHECK(file.tensors.at("a").item() == 1.5);
  CHECK(file.tensors.at("b").shape() == sf::Shape{1, 1});
  CHECK(file.tensors.at("b").item() == 0.5);
  CHECK(file.metadata.size() == 1);
  CHECK_FALSE(file.checksum_verified);  // nothing to verify it with: the caller says so

  // With a checksum the external file is verified like any other.
  const std::string checked = R"({"__metadata__":{"scratchformer.origin":"external","scratchformer.checksum":")" +
                              fnv1a64(data) + R"("},"a":{"data_offsets":[4,12],"shape":[1],"dtype":"F64"},)"
                              R"("b":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}})";
  write_file(path, raw_file(checked, data));
  CHECK(load_safetensors(path).checksum_verified);

  // The same tensors with bytes 4..7 claimed by nobody: the format forbids gaps.
  const std::string gap_header = R"({"a":{"data_offsets":[8,16],"shape":[1],"dtype":"F64"},)"
                                 R"("b":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}})";
  write_file(path, raw_file(gap_header, std::string(16, '\0')));
  require_load_error(path, "gap of 4 bytes");
}

TEST_CASE("safetensors rejects truncated files at any length", "[checkpoint][safetensors][errors]") {
  TempDir dir;
  const std::string good = dir / "good.safetensors";
  sf::Generator gen(3);
  save_safetensors(good, {{"a", sf::randn({4, 4}, gen)}, {"b", sf::randn({3}, gen, Dtype::Float64)}}, {{"step", "9"}});
  const std::string bytes = read_file(good);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  REQUIRE(8 + header_len < bytes.size());

  const std::string cut = dir / "cut.safetensors";
  for (std::size_t size : {std::size_t{0}, std::size_t{3}, std::size_t{7}, std::size_t{8}, std::size_t{9},
                           8 + header_len / 2, 8 + header_len - 1, 8 + header_len, 8 + header_len + 5,
                           bytes.size() - 1}) {
    INFO("truncated to " << size << " of " << bytes.size() << " bytes");
    write_file(cut, bytes.substr(0, size));
    REQUIRE_THROWS_AS(load_safetensors(cut), CheckpointError);
    REQUIRE_THROWS_WITH(load_safetensors(cut), Contains(cut) && !Contains("\n"));
  }
  write_file(cut, bytes.substr(0, 5));
  require_load_error(cut, "too short to hold the 8-byte header length");
  write_file(cut, bytes.substr(0, 8 + header_len - 1));
  require_load_error(cut, "header length");
  write_file(cut, bytes.substr(0, bytes.size() - 1));
  require_load_error(cut, "beyond the data section");
  // Extra bytes after the last tensor are damage too.
  write_file(cut, bytes + "x");
  require_load_error(cut, "the tensors cover");
}

TEST_CASE("safetensors refuses a file without a checksum unless it declares itself external",
          "[checkpoint][safetensors][errors]") {
  TempDir dir;
  const std::string path = dir / "n.safetensors";
  const std::string data = std::string("\x00\x00\x80\x3F", 4);  // 1.0f
  const std::string tensor = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  // No metadata at all, metadata without the key, and an origin other than "external".
  for (const std::string& metadata : {std::string(), std::string(R"("__metadata__":{"step":"3"},)"),
                                      std::string(R"("__metadata__":{"scratchformer.origin":"torch"},)")}) {
    INFO("metadata " << metadata);
    write_file(path, raw_file("{" + metadata + tensor + "}", data));
    require_load_error(path, "no checksum: metadata key \"scratchformer.checksum\" is missing");
  }
  // A Scratchformer checkpoint whose checksum was deleted: refused, however intact its data.
  save_safetensors(path, {{"a", sf::arange(0.0, 10.0, 1.0, Dtype::Float32)}}, {{"step", "1"}});
  std::string bytes = read_file(path);
  // {"__metadata__":{"scratchformer.checksum":"fnv1a64:<16 hex>","step":"1"},...: the key, its value
  // and the comma after them become spaces (the header keeps its length, the JSON stays valid)
  const std::string key = std::string("\"") + sf::train::kChecksumKey + "\":\"fnv1a64:";
  const auto at = bytes.find(key);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes.substr(at + key.size() + 16, 2) == "\",");
  bytes.replace(at, key.size() + 16 + 2, std::string(key.size() + 16 + 2, ' '));
  write_file(path, bytes);
  require_load_error(path, "no checksum");
}

TEST_CASE("safetensors detects a corrupted data byte by its checksum", "[checkpoint][safetensors][errors]") {
  TempDir dir;
  const std::string path = dir / "c.safetensors";
  save_safetensors(path, {{"a", sf::arange(0.0, 10.0, 1.0, Dtype::Float32)}});
  std::string bytes = read_file(path);
  bytes[bytes.size() - 3] ^= 0x10;  // one bit of the last float
  write_file(path, bytes);
  require_load_error(path, "checksum mismatch");
}

TEST_CASE("safetensors rejects malformed headers", "[checkpoint][safetensors][errors]") {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  const std::string eight(8, '\0');
  struct Case {
    const char* header;
    std::string data;
    const char* expected;
  };
  const Case cases[] = {
      {R"({"a": {"dtype": "F32", )", eight, "malformed JSON header"},
      {R"([1, 2])", "", "expected a JSON object"},
      {R"({"a": 3})", "", "tensor \"a\": expected an object"},
      {R"({"a": {"shape": [2], "data_offsets": [0, 8]}})", eight, "tensor \"a\": missing dtype"},
      {R"({"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}})", eight, "unsupported dtype \"F16\""},
      {R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", eight, "missing shape"},
      {R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", eight, "non-negative integers"},
      {R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", eight, "needs 12 bytes"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", eight, "0 <= begin <= end"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", eight, "data_offsets must be"},
      {R"({"a": {"dtype": "F32", "shape": [250], "data_offsets": [0, 1000]}})", eight, "beyond the data section"},
      {R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})", eight, "too large"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       std::string(12, '\0'), "overlap"},
      {R"({"__metadata__": {"step": 5}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", eight,
       "must be a string"},
      {R"({"__metadata__": {"scratchformer.checksum": "md5:00"}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
       eight, "unknown checksum"},
  };
  for (const Case& c : cases) {
    INFO("header " << c.header);
    write_file(path, raw_file(c.header, c.data));
    require_load_error(path, c.expected);
  }
  require_load_error(dir / "missing.safetensors", "not found");
  require_load_error(dir.path.string(), "is a directory");
}

TEST_CASE("safetensors save failures leave the previous file intact", "[checkpoint][safetensors][errors]") {
  TempDir dir;
  const std::string path = dir / "last.safetensors";
  const Tensor old_values = sf::from_vector<float>({1, 2, 3}, {3});
  save_safetensors(path, {{"w", old_values}}, {{"step", "100"}});
  const std::string old_bytes = read_file(path);
  const std::vector<std::pair<std::string, Tensor>> new_tensors{{"w", sf::from_vector<float>({4, 5, 6}, {3})}};

  SECTION("the temporary file cannot be created") {
    fs::create_directory(path + ".tmp");  // blocks PATH.tmp, even for root
    REQUIRE_THROWS_AS(save_safetensors(path, new_tensors), CheckpointError);
    REQUIRE_THROWS_WITH(save_safetensors(path, new_tensors), Contains(path) && Contains("cannot create"));
  }
  SECTION("the disk fills up while writing") {
    if (!fs::exists("/dev/full")) return;  // Linux only
    fs::create_symlink("/dev/full", path + ".tmp");  // every write to PATH.tmp fails with ENOSPC
    REQUIRE_THROWS_WITH(save_safetensors(path, new_tensors), Contains(path) && Contains("cannot write"));
    CHECK_FALSE(fs::exists(fs::symlink_status(path + ".tmp")));  // the temporary is cleaned up
  }
  SECTION("a tensor cannot be saved") {
    const std::vector<std::pair<std::string, Tensor>> bad{{"w", sf::zeros({2})}, {"mask", sf::zeros({2}, Dtype::Bool)}};
    REQUIRE_THROWS_WITH(save_safetensors(path, bad), Contains("mask") && Contains("bool is not supported"));
    const std::vector<std::pair<std::string, Tensor>> dup{{"w", sf::zeros({2})}, {"w", sf::zeros({2})}};
    REQUIRE_THROWS_WITH(save_safetensors(path, dup), Contains("two tensors named \"w\""));
  }
  SECTION("the folder does not exist") {
    const std::string elsewhere = dir / "no/such/dir/x.safetensors";
    REQUIRE_THROWS_AS(save_safetensors(elsewhere, new_tensors), CheckpointError);
    CHECK_FALSE(fs::exists(elsewhere));
  }
  CHECK(read_file(path) == old_bytes);
  CHECK(load_safetensors(path).tensors.at("w").to_vector<float>() == std::vector<float>{1, 2, 3});
}
