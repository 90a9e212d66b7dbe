// docs/checkpoint-format.md against the files Scratchformer writes, and the two checkpoint readers:
//   - the page's tensor tables, expanded for a config, name exactly the tensors (and shapes) of a
//     checkpoint of that config, for every architecture and the [model] keys that change the list;
//     a real training run's checkpoint too; its metadata table names every key the trainer writes
//   - inference loads a weights-only checkpoint (weights + config) and translates as the full one;
//     --resume refuses it naming the missing key
//   - a checkpoint without its checksum does not load (exit 2, one line) unless it declares
//     "scratchformer.origin" = "external", which loads with one line saying it is unverified
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "run_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/optim/optim.h"
#include "train/checkpoint/safetensors.h"
#include "train/setup.h"

using namespace sf;
using namespace sf::test;
using Catch::Contains;

namespace {

const std::string kFormatDoc = kSourceDir + "/docs/checkpoint-format.md";

// One row of a tensor table: `name` | shape | present when.
struct DocRow {
  std::string name, shape, when;
};

// The rows of the table under "### <arch>" in the page.
std::vector<DocRow> doc_rows(const std::string& arch) {
  std::istringstream in(read_file(kFormatDoc));
  std::string line;
  bool inside = false;
  std::vector<DocRow> rows;
  const std::regex row(R"(^\| `([^`]+)` \| \(([^)]*)\) \| ([^|]+) \|$)");
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) inside = line == "### " + arch;
    std::smatch m;
    if (inside && std::regex_match(line, m, row)) rows.push_back({m[1], m[2], m[3]});
  }
  return rows;
}

// What one checkpoint is made of: the [model] section, the task, the vocabulary sizes.
struct Variant {
  std::string what;
  train::ModelSection m;
  std::string task;
  std::int64_t src_vocab, tgt_vocab, classes;
};

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The value of a [model] key (or "task") as the page's conditions write it.
std::string setting(const Variant& v, const std::string& key) {
  const train::ModelSection& m = v.m;
  if (key == "share_embeddings") return m.share_embeddings ? "true" : "false";
  if (key == "tie_output") return m.tie_output ? "true" : "false";
  if (key == "positional") return m.positional;
  if (key == "activation") return m.activation;
  if (key == "norm") return m.norm;
  if (key == "norm_position") return m.norm_position;
  if (key == "task") return v.task;
  FAIL("the page's condition names an unknown key '" << key << "'");
  return "";
}

// "always" or "key = value[, key = value ...]", all of which must hold.
bool holds(const Variant& v, const std::string& when) {
  if (trim(when) == "always") return true;
  std::istringstream parts(when);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const auto eq = part.find(" = ");
    REQUIRE(eq != std::string::npos);
    if (setting(v, trim(part.substr(0, eq))) != trim(part.substr(eq + 3))) return false;
  }
  return true;
}

// "Vs, D" -> {Vs, D} with the page's letters.
Shape shape_of(const Variant& v, const std::string& text) {
  const std::int64_t D = v.m.d_model, kv = v.m.n_kv_heads == 0 ? v.m.n_heads : v.m.n_kv_heads;
  const std::map<std::string, std::int64_t> letters = {
      {"D", D},        {"F", v.m.d_ff},         {"L", v.m.max_len},     {"H", v.m.n_heads},
      {"Dkv", kv * D / v.m.n_heads}, {"Vs", v.src_vocab}, {"Vt", v.tgt_vocab}, {"C", v.classes}};
  Shape shape;
  std::istringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const auto it = letters.find(trim(part));
    if (it == letters.end()) FAIL("the page's shape (" << text << ") has an unknown letter '" << trim(part) << "'");
    shape.push_back(it->second);
  }
  return shape;
}

// The tensors the page lists for `v`: name -> shape, with {i} expanded over the stack's layers.
std::map<std::string, Shape> documented_tensors(const Variant& v) {
  const auto rows = doc_rows(v.m.arch);
  REQUIRE(rows.size() > 10);
  std::map<std::string, Shape> out;
  for (const DocRow& r : rows) {
    if (!holds(v, r.when)) continue;
    const auto at = r.name.find("{i}");
    if (at == std::string::npos) {
      out[r.name] = shape_of(v, r.shape);
      continue;
    }
    const std::int64_t layers = r.name.rfind("encoder.", 0) == 0 ? v.m.encoder_layers : v.m.decoder_layers;
    for (std::int64_t i = 0; i < layers; ++i)
      out[r.name.substr(0, at) + std::to_string(i) + r.name.substr(at + 3)] = shape_of(v, r.shape);
  }
  return out;
}

// The model tensors (not "optimizer.*") of a safetensors file: name -> shape.
std::map<std::string, Shape> model_tensors(const train::SafetensorsFile& f) {
  std::map<std::string, Shape> out;
  for (const auto& [name, t] : f.tensors)
    if (name.rfind("optimizer.", 0) != 0) out[name] = t.shape();
  return out;
}

void require_same_tensors(const std::map<std::string, Shape>& documented, const std::map<std::string, Shape>& saved) {
  for (const auto& [name, shape] : saved) {
    INFO("the checkpoint holds " << name << " " << shape_str(shape));
    REQUIRE(documented.count(name) == 1);
    CHECK(documented.at(name) == shape);
  }
  for (const auto& [name, shape] : documented) {
    INFO("the page lists " << name << " " << shape_str(shape));
    CHECK(saved.count(name) == 1);
  }
}

train::ModelSection small_model(const std::string& arch) {
  train::ModelSection m;
  m.arch = arch;
  m.d_model = 16, m.n_heads = 4, m.d_ff = 24, m.encoder_layers = 2, m.decoder_layers = 3, m.max_len = 20;
  m.dropout = 0;
  return m;
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  // encoder-decoder: the defaults (shared, tied, sinusoidal, LayerNorm, pre-LN, ReLU) and the other
  // value of every key that changes the list
  out.push_back({"encoder-decoder, defaults", small_model("encoder-decoder"), "translation", 37, 37, 0});
  Variant ed{"encoder-decoder, separate tables, learned, RMSNorm, post-LN, SwiGLU, GQA", small_model("encoder-decoder"),
             "translation", 37, 41, 0};
  ed.m.share_embeddings = false, ed.m.tie_output = false, ed.m.positional = "learned", ed.m.norm = "rmsnorm";
  ed.m.norm_position = "post", ed.m.activation = "swiglu", ed.m.n_kv_heads = 2;
  out.push_back(ed);
  Variant ed_pre_rms{"encoder-decoder, pre-LN RMSNorm, RoPE, multi-query", small_model("encoder-decoder"), "translation", 37,
                     37, 0};
  ed_pre_rms.m.norm = "rmsnorm", ed_pre_rms.m.positional = "rope", ed_pre_rms.m.n_kv_heads = 1;
  out.push_back(ed_pre_rms);
  // decoder-only
  out.push_back({"decoder-only lm, defaults", small_model("decoder-only"), "lm", 41, 41, 0});
  Variant dec{"decoder-only, learned, RMSNorm, post-LN, SwiGLU, GQA", small_model("decoder-only"), "translation", 41, 41, 0};
  dec.m.positional = "learned", dec.m.norm = "rmsnorm", dec.m.norm_position = "post", dec.m.activation = "swiglu";
  dec.m.n_kv_heads = 2;
  out.push_back(dec);
  // encoder-only
  out.push_back({"encoder-only mlm, defaults", small_model("encoder-only"), "mlm", 37, 37, 0});
  Variant cls{"encoder-only classify, learned, GELU, post-LN", small_model("encoder-only"), "classify", 37, 37, 3};
  cls.m.positional = "learned", cls.m.activation = "gelu", cls.m.norm_position = "post";
  out.push_back(cls);
  return out;
}

// A checkpoint of `v` as the trainer writes it (save_checkpoint with Adam's state) in `tmp`.
std::string save_variant(const TempDir& tmp, const Variant& v) {
  Generator gen(1);
  auto model = nn::make_model(train::model_config_from(v.m, v.src_vocab, v.tgt_vocab, v.classes), gen);
  train::Adam adam(model->named_parameters());
  const std::string path = tmp / "variant.safetensors";
  train::save_checkpoint(path, *model, &adam, train::TrainingState{}, "[model]\n", v.src_vocab, v.tgt_vocab);
  return path;
}

}  // namespace

TEST_CASE("the format page's tensor tables name exactly what a checkpoint holds, for every architecture",
          "[checkpoint][safetensors][docs]") {
  TempDir tmp;
  for (const Variant& v : variants()) {
    INFO(v.what);
    const train::SafetensorsFile f = train::load_safetensors(save_variant(tmp, v));
    const auto saved = model_tensors(f);
    require_same_tensors(documented_tensors(v), saved);
    // the optimizer's state: optimizer.adam.m.<name> and optimizer.adam.v.<name>, shaped as <name>
    CHECK(f.tensors.size() == 3 * saved.size());
    for (const auto& [name, shape] : saved)
      for (const char* slot : {"optimizer.adam.m.", "optimizer.adam.v."}) {
        INFO(slot << name);
        REQUIRE(f.tensors.count(slot + name) == 1);
        CHECK(f.tensors.at(slot + name).shape() == shape);
      }
  }
}

TEST_CASE("the format page matches a real run's checkpoint: its tensors and every metadata key",
          "[checkpoint][safetensors][docs]") {
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const train::SafetensorsFile f = train::load_safetensors(run + "/checkpoint-last.safetensors");
  const train::Config cfg = train::config_from_string(f.metadata.at("config"), "checkpoint-last");
  const Variant v{"the reverse run", cfg.model, cfg.data.task, std::stoll(f.metadata.at("src_vocab")),
                  std::stoll(f.metadata.at("tgt_vocab")), 0};
  require_same_tensors(documented_tensors(v), model_tensors(f));

  // Every key of the metadata table, in backquotes in its first cell.
  std::set<std::string> documented;
  const std::string page = read_file(kFormatDoc);
  const auto table = page.find("| key | needed for | value |");
  REQUIRE(table != std::string::npos);
  std::istringstream rows(page.substr(table, page.find("\n\n", table) - table));
  std::string row;
  const std::regex key("`([a-z_.]+)`");
  while (std::getline(rows, row)) {
    const std::string first_cell = row.substr(0, row.find('|', 1));
    for (std::sregex_iterator it(first_cell.begin(), first_cell.end(), key), end; it != end; ++it) documented.insert((*it)[1]);
  }
  for (const auto& [k, value] : f.metadata) {
    INFO("the trainer writes metadata key " << k);
    CHECK(documented.count(k) == 1);
  }
}

namespace {

// A copy of the checkpoint at `from`, written to `to` with its metadata replaced by `metadata` and
// its data section as it is: the header is written here, so no checksum is added (save_safetensors
// always adds one). `flip` > 0 flips one bit of the data byte that many bytes from the end.
void write_with_metadata(const std::string& from, const std::string& to, const std::map<std::string, std::string>& metadata,
                         std::size_t flip = 0) {
  const std::string bytes = read_file(from);
  const std::uint64_t n = header_length(bytes);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  std::string data = bytes.substr(8 + n);
  if (flip > 0) data[data.size() - flip] ^= 0x04;
  write_file(to, with_header_length(std::string(8, '\0'), text.size()) + text + data);
}

}  // namespace

TEST_CASE("inference needs only the weights and the config, --resume needs the whole state",
          "[checkpoint][translate][resume][errors][cli]") {
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const std::string last = run + "/checkpoint-last.safetensors";
  const std::string input = tmp.write("in.txt", "lo be co\nda fi lo be\n");
  auto translate = [&](const std::string& checkpoint) {
    return run_cli("translate --checkpoint " + quoted(checkpoint) + " --input " + quoted(input), tmp);
  };
  const CliResult full = translate(last);
  REQUIRE(full.status == 0);

  // the weights and "config" only (save_edited adds a checksum), beside the run's spm.model
  const std::string weights_only = run + "/weights-only.safetensors";
  save_edited(last, weights_only, [](auto& tensors, auto& meta) {
    std::erase_if(tensors, [](const auto& t) { return t.first.rfind("optimizer.", 0) == 0; });
    meta = {{"config", meta.at("config")}};
  });
  const CliResult r = translate(weights_only);
  INFO("stderr: " << r.err);
  CHECK(r.status == 0);
  CHECK(r.out == full.out);
  CHECK(r.err.empty());

  // resume from it: one line naming the first missing key, and the file left as it was
  fs::copy_file(weights_only, last, fs::copy_options::overwrite_existing);
  const std::string before = read_file(last);
  const CliResult resumed =
      run_cli(train_args(small_reverse_run(tmp, run, {"train.max_steps=6", "train.valid_every=2"})) + " --resume", tmp);
  check_one_line_error(resumed, {last, "metadata key 'scratchformer.format' is missing", "--resume needs the whole training state"});
  CHECK(read_file(last) == before);
}

TEST_CASE("a checkpoint without its checksum loads only when it declares itself external",
          "[checkpoint][safetensors][translate][errors][cli]") {
  TempDir tmp;
  const std::string run = trained_run(tmp);
  const std::string best = run + "/checkpoint-best.safetensors";
  const std::string input = tmp.write("in.txt", "lo be co\nda fi lo be\n");
  const std::string edited = run + "/edited.safetensors";
  auto translate = [&] { return run_cli("translate --checkpoint " + quoted(edited) + " --input " + quoted(input), tmp); };
  const CliResult full = run_cli("translate --checkpoint " + quoted(best) + " --input " + quoted(input), tmp);
  REQUIRE(full.status == 0);
  std::map<std::string, std::string> meta = train::load_safetensors(best).metadata;
  meta.erase(train::kChecksumKey);

  SECTION("the checksum key deleted: refused, intact data or not") {
    write_with_metadata(best, edited, meta);
    check_one_line_error(translate(), {edited, "no checksum", train::kOriginKey});
    write_with_metadata(best, edited, meta, /*flip=*/3);
    check_one_line_error(translate(), {edited, "no checksum"});
  }
  SECTION("external, without a checksum: loads, and says once that it is unverified") {
    meta[train::kOriginKey] = train::kExternalOrigin;
    write_with_metadata(best, edited, meta);
    const CliResult r = translate();
    CHECK(r.status == 0);
    CHECK(r.out == full.out);
    CHECK(r.err == "note: " + edited + " has no checksum (scratchformer.origin = \"external\"): its data is loaded unverified\n");
  }
  SECTION("external with a checksum: verified like any other") {
    save_edited(best, edited, [](auto&, auto& m) { m[train::kOriginKey] = train::kExternalOrigin; });
    const CliResult r = translate();
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    std::string bytes = read_file(edited);
    bytes[bytes.size() - 3] ^= 0x04;
    write_file(edited, bytes);
    check_one_line_error(translate(), {edited, "checksum mismatch"});
  }
}
