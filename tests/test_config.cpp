// Tests for train/config: defaults, path resolution, every kind of value, --set overrides, the
// to_toml round trip, and every error a student can make in a config file (one line each, naming
// the file, the key and what was expected).
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"
#include "train/config.h"
#include "train/data_folder.h"

namespace {

namespace fs = std::filesystem;
using Catch::Contains;
using sf::train::Config;
using sf::train::ConfigError;
using sf::train::closest;
using sf::train::edit_distance;
using sf::train::load_config;

using sf::test::TempDir;  // tests/test_util.h

// The smallest valid config: only the required keys.
const std::string kRequired = R"([data]
train_src = "corpus/train.de"
train_tgt = "corpus/train.en"
valid_src = "corpus/valid.de"
valid_tgt = "corpus/valid.en"

[run]
dir = "runs/test"
)";

// kRequired with the line that sets `key` replaced by `line` ("" deletes it).
std::string required_with(const std::string& key, const std::string& line) {
  std::string text = kRequired;
  const auto at = text.find(key + " = ");
  return text.replace(at, text.find('\n', at) + 1 - at, line.empty() ? "" : line + "\n");
}

// A config whose [model] section is `model_lines`, followed by the required keys.
std::string with_model(const std::string& model_lines) { return "[model]\n" + model_lines + "\n" + kRequired; }

// Loading `text` (written to cfg.toml) with `overrides` must throw a one-line ConfigError that
// contains each of `expected`.
void require_config_error(const std::string& text, const std::vector<std::string>& overrides,
                          const std::vector<std::string>& expected) {
  TempDir dir;
  const std::string path = dir.write("cfg.toml", text);
  REQUIRE_THROWS_AS(load_config(path, overrides), ConfigError);
  REQUIRE_THROWS_WITH(load_config(path, overrides), !Contains("\n"));
  for (const std::string& part : expected) REQUIRE_THROWS_WITH(load_config(path, overrides), Contains(part));
}

}  // namespace

TEST_CASE("config fills every optional key with its default", "[config]") {
  TempDir dir;
  const Config c = load_config(dir.write("cfg.toml", kRequired));

  CHECK(c.model.d_model == 256);
  CHECK(c.model.n_heads == 4);
  CHECK(c.model.n_kv_heads == 0);
  CHECK(c.model.d_ff == 1024);
  CHECK(c.model.encoder_layers == 3);
  CHECK(c.model.decoder_layers == 3);
  CHECK(c.model.dropout == 0.1);
  CHECK(c.model.attention_dropout == 0.0);
  CHECK(c.model.activation == "relu");
  CHECK(c.model.norm == "layernorm");
  CHECK(c.model.norm_position == "pre");
  CHECK(c.model.positional == "sinusoidal");
  CHECK(c.model.share_embeddings);
  CHECK(c.model.tie_output);
  CHECK(c.model.max_len == 256);

  CHECK(c.data.test_src.empty());
  CHECK(c.data.test_tgt.empty());
  CHECK(c.data.tokenizer_vocab_size == 8000);
  CHECK(c.data.tokenizer_type == "unigram");
  CHECK(c.data.joint_tokenizer);
  CHECK(c.data.max_tokens == 100);
  CHECK(c.data.batch_tokens == 4096);
  CHECK(c.data.bleu_tokenize == "13a");
  CHECK(c.data.max_valid_sentences == 0);

  CHECK(c.train.seed == 1);
  CHECK(c.train.optimizer == "adam");
  CHECK(c.train.lr == 1.0);
  CHECK(c.train.beta1 == 0.9);
  CHECK(c.train.beta2 == 0.98);
  CHECK(c.train.eps == 1e-9);
  CHECK(c.train.weight_decay == 0.0);
  CHECK(c.train.momentum == 0.0);
  CHECK(c.train.schedule == "noam");
  CHECK(c.train.warmup_steps == 4000);
  CHECK(c.train.max_steps == 100000);
  CHECK(c.train.max_epochs == 0);
  CHECK(c.train.label_smoothing == 0.1);
  CHECK(c.train.clip_norm == 1.0);
  CHECK(c.train.accum_steps == 1);
  CHECK(c.train.log_every == 100);
  CHECK(c.train.valid_every == 1000);
  CHECK(c.train.patience == 0);
  CHECK(c.train.best_metric == "bleu");
  CHECK(c.train.valid_beam == 1);
  CHECK(c.train.max_nonfinite == 5);
  CHECK(c.train.min_lr == 0.0);

  CHECK(c.run.threads == 0);
  CHECK(c.run.keep_checkpoints == 1);
}

TEST_CASE("config resolves paths against the config file folder", "[config]") {
  TempDir dir;
  const std::string text = "[data]\ntest_src = \"/abs/test.de\"\ntest_tgt = \"../up/test.en\"\n" +
                           kRequired.substr(std::string("[data]\n").size());
  const Config c = load_config(dir.write("configs/cfg.toml", text));
  const fs::path configs = fs::path(dir.path) / "configs";

  CHECK(c.data.train_src == (configs / "corpus/train.de").string());
  CHECK(c.data.valid_tgt == (configs / "corpus/valid.en").string());
  CHECK(c.run.dir == (configs / "runs/test").string());
  CHECK(c.data.test_src == "/abs/test.de");                                 // absolute: kept
  CHECK(c.data.test_tgt == (fs::path(dir.path) / "up/test.en").string());  // ".." folded away
  CHECK(fs::path(c.data.train_src).is_absolute());
  CHECK(c.source_path == (configs / "cfg.toml").string());
}

TEST_CASE("config reads integers floats booleans strings and choices", "[config]") {
  TempDir dir;
  const std::string text = R"([model]
d_model = 512
n_heads = 8
n_kv_heads = 2
dropout = 0.3
share_embeddings = false
norm = "rmsnorm"
positional = "rope"
[train]
lr = 2            # an integer where a float is expected is fine
eps = 1e-6
optimizer = "adamw"
schedule = "cosine"
best_metric = "loss"
)" + kRequired;
  const Config c = load_config(dir.write("cfg.toml", text));
  CHECK(c.model.d_model == 512);
  CHECK(c.model.n_heads == 8);
  CHECK(c.model.n_kv_heads == 2);
  CHECK(c.model.dropout == 0.3);
  CHECK_FALSE(c.model.share_embeddings);
  CHECK(c.model.norm == "rmsnorm");
  CHECK(c.model.positional == "rope");
  CHECK(c.train.lr == 2.0);
  CHECK(c.train.eps == 1e-6);
  CHECK(c.train.optimizer == "adamw");
  CHECK(c.train.schedule == "cosine");
  CHECK(c.train.best_metric == "loss");
  CHECK(c.model.d_ff == 1024);  // untouched keys keep their defaults
}

TEST_CASE("config applies set overrides of every type", "[config]") {
  TempDir dir;
  const std::string path = dir.write("configs/cfg.toml", with_model("d_model = 128"));
  const fs::path configs = fs::path(dir.path) / "configs";

  const Config c = load_config(path, {
                                         "model.d_model=512",            // integer, replacing a file value
                                         "train.lr=0.5",                 // float
                                         "train.min_lr = 2",             // integer for a float; spaces
                                         "model.tie_output=false",       // boolean
                                         "model.norm=\"rmsnorm\"",       // quoted string
                                         "model.activation=gelu",        // unquoted string
                                         "data.tokenizer_type=bpe",      // key absent from the file
                                         "data.train_src=other/t.de",    // path: relative to the config
                                         "run.dir=/tmp/sf-run",          // absolute path
                                         "data.bleu_tokenize=13a",       // looks like a number, is a string
                                         "train.seed=7", "train.seed=9",  // the later one wins
                                     });
  CHECK(c.model.d_model == 512);
  CHECK(c.train.lr == 0.5);
  CHECK(c.train.min_lr == 2.0);
  CHECK_FALSE(c.model.tie_output);
  CHECK(c.model.norm == "rmsnorm");
  CHECK(c.model.activation == "gelu");
  CHECK(c.data.tokenizer_type == "bpe");
  CHECK(c.data.train_src == (configs / "other/t.de").string());
  CHECK(c.run.dir == "/tmp/sf-run");
  CHECK(c.data.bleu_tokenize == "13a");
  CHECK(c.train.seed == 9);

  SECTION("an override can supply a required key the file lacks") {
    const std::string no_dir = dir.write("nodir.toml", required_with("dir", ""));
    CHECK(load_config(no_dir, {"run.dir=out"}).run.dir == (fs::path(dir.path) / "out").string());
  }
}

TEST_CASE("config to_toml round trips to an equal config", "[config]") {
  TempDir dir;
  const std::string text = R"([data]
test_src = 'odd "name" with\back slash ü.de'
test_tgt = "test.en"
)" + kRequired.substr(std::string("[data]\n").size());
  const Config original =
      load_config(dir.write("a/cfg.toml", text), {"model.norm=rmsnorm", "model.n_kv_heads=2", "train.lr=3e-4",
                                                   "train.schedule=cosine", "model.dropout=0.123456789012345",
                                                   "model.share_embeddings=false", "data.joint_tokenizer=false",
                                                   "train.max_epochs=12", "run.threads=2"});
  const std::string written = to_toml(original);
  // Loaded from a different folder: the paths are absolute, so they must not move.
  const Config reloaded = load_config(dir.write("b/elsewhere/config.toml", written));

  CHECK(reloaded == original);
  CHECK(reloaded.data.test_src == original.data.test_src);
  CHECK(reloaded.model.dropout == original.model.dropout);  // exact, not approximate: shortest round-trip text
  CHECK(reloaded.train.eps == 1e-9);
  CHECK(to_toml(reloaded) == written);
  // Every key is written, defaults included.
  for (const char* line : {"[model]", "[data]", "[train]", "[run]", "n_kv_heads = 2", "d_ff = 1024",
                           "max_valid_sentences = 0", "min_lr = 0.0", "keep_checkpoints = 1", "eps = 1e-09"})
    CHECK_THAT(written, Contains(line));
}

TEST_CASE("config reports a missing file and missing required keys", "[config][errors]") {
  TempDir dir;
  const std::string missing = (fs::path(dir.path) / "nope.toml").string();
  REQUIRE_THROWS_AS(load_config(missing, {}), ConfigError);
  REQUIRE_THROWS_WITH(load_config(missing, {}), Contains(missing) && Contains("not found"));

  require_config_error(required_with("dir", ""), {}, {"cfg.toml", "run.dir", "required key is missing"});
  require_config_error(required_with("train_src", ""), {}, {"cfg.toml", "data.train_src", "required key is missing"});
  require_config_error("[run]\ndir = \"x\"\n", {}, {"cfg.toml", "data.train_src", "required key is missing"});
  require_config_error(kRequired, {"run.dir="}, {"--set run.dir=", "expected a path, got an empty string"});
}

TEST_CASE("config reports a TOML syntax error with its line", "[config][errors]") {
  require_config_error("[model]\nd_model = 256\n\nn_heads = = 4\n" + kRequired, {},
                       {"cfg.toml:4:", "syntax error", "n_heads = = 4"});
  require_config_error("[model]\nd_model = 256\nd_model = 512\n" + kRequired, {}, {"cfg.toml:", "syntax error"});
}

TEST_CASE("config rejects unknown sections and keys with a suggestion", "[config][errors]") {
  require_config_error("[modle]\nd_model = 256\n" + kRequired, {},
                       {"cfg.toml:1:", "unknown section [modle]", "did you mean [model]?"});
  require_config_error(with_model("d_model = 256\nd_modle = 512"), {},
                       {"cfg.toml:3:", "unknown key model.d_modle", "did you mean model.d_model?"});
  require_config_error(with_model("lr = 0.5"), {}, {"unknown key model.lr", "did you mean train.lr?"});
  require_config_error("d_model = 256\n" + kRequired, {}, {"cfg.toml:1:", "d_model", "under [model]"});
  // Nothing close: no suggestion at all.
  TempDir dir;
  const std::string path = dir.write("cfg.toml", with_model("colour = \"blue\""));
  REQUIRE_THROWS_WITH(load_config(path, {}), Contains("unknown key model.colour") && !Contains("did you mean"));
}

TEST_CASE("closest suggests a name within two edits and nothing further away", "[config][errors][cli]") {
  // The "did you mean" of config keys and of command-line options and commands (train/cli/main.cpp).
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("--refs", "--ref") == 1);
  CHECK(edit_distance("trian", "train") == 2);  // a swapped pair is two substitutions
  const std::vector<std::string> options = {"--ref", "--tokenize", "--metric", "--help"};
  CHECK(closest("--refs", options) == "--ref");
  CHECK(closest("--tokenise", options) == "--tokenize");
  CHECK(closest("--metrc", options) == "--metric");
  CHECK(closest("--colour", options).empty());  // three or more edits from every option
  CHECK(closest("--anything", {}).empty());
  // The nearest wins; of two as near, the first listed.
  CHECK(closest("--ab", {"--abcd", "--abc"}) == "--abc");
  CHECK(closest("--ax", {"--ay", "--az"}) == "--ay");
}

TEST_CASE("config rejects values of the wrong type", "[config][errors]") {
  require_config_error(with_model("d_model = \"256\""), {},
                       {"cfg.toml:2: model.d_model: expected an integer, got a string"});
  require_config_error(with_model("d_model = 256.5"), {}, {"model.d_model: expected an integer, got a float"});
  require_config_error(with_model("tie_output = 1"), {}, {"model.tie_output: expected a boolean", "got an integer"});
  require_config_error(with_model("dropout = \"0.1\""), {}, {"model.dropout: expected a number, got a string"});
  require_config_error(with_model("activation = 3"), {}, {"model.activation: expected one of the strings"});
  require_config_error("[train]\nlr = inf\n" + kRequired, {}, {"train.lr: expected a finite number, got inf"});
  require_config_error(required_with("train_src", "train_src = [\"a\", \"b\"]"), {},
                       {"data.train_src: expected a string", "got an array"});
  require_config_error("model = 3\n" + kRequired, {}, {"model: expected a section [model], got an integer"});
}

TEST_CASE("config rejects sizes probabilities and enum values out of range", "[config][errors]") {
  require_config_error(with_model("d_model = 0"), {}, {"model.d_model: expected a positive integer, got 0"});
  require_config_error(with_model("encoder_layers = -2"), {}, {"model.encoder_layers", "got -2"});
  require_config_error(kRequired, {"data.batch_tokens=-5"},
                       {"cfg.toml: --set data.batch_tokens=-5: expected a positive integer, got -5"});
  require_config_error(kRequired, {"model.n_kv_heads=-1"}, {"expected 0 (= n_heads) or a positive integer"});
  require_config_error(with_model("dropout = 1.5"), {}, {"model.dropout: expected a value in [0, 1), got 1.5"});
  require_config_error(kRequired, {"train.eps=0"}, {"--set train.eps=0: expected a positive number, got 0.0"});
  require_config_error(with_model("d_model = 250\nn_heads = 8"), {},
                       {"cfg.toml:3: model.n_heads: d_model 250 is not divisible by n_heads 8"});
  require_config_error(with_model("n_heads = 8\nn_kv_heads = 3"), {},
                       {"model.n_kv_heads: n_heads 8 is not divisible by n_kv_heads 3"});
  require_config_error(with_model("activation = \"tanh\""), {},
                       {"model.activation: expected one of relu, gelu, swiglu, got \"tanh\""});
  require_config_error(kRequired, {"train.schedule=linear"},
                       {"--set train.schedule=linear: expected one of noam, cosine, constant"});
  require_config_error(with_model("positional = \"rope\"\nd_model = 12\nn_heads = 4"), {},
                       {"model.positional", "head width d_model / n_heads must be even, got 3"});
  require_config_error(kRequired, {"data.joint_tokenizer=false"}, {"model.share_embeddings", "joint_tokenizer"});
  // Sliding windows and RoPE scaling (tests/test_sliding_window.cpp has what they do).
  require_config_error(with_model("max_len = 64\nattention_window = 65"), {},
                       {"model.attention_window", "0 (full attention) to max_len 64", "got 65"});
  require_config_error(kRequired, {"model.attention_window=-1"}, {"model.attention_window", "got -1"});
  require_config_error(with_model("rope_scaling = \"ntk\"\nrope_factor = 4.0"), {},
                       {"model.rope_scaling", "needs model.positional = \"rope\"", "got positional \"sinusoidal\""});
  require_config_error(with_model("positional = \"rope\"\nrope_factor = 4.0"), {},
                       {"model.rope_factor", "rope_scaling is \"none\""});
  require_config_error(with_model("positional = \"rope\"\nrope_scaling = \"interpolation\"\nrope_factor = 0.5"), {},
                       {"model.rope_factor", "expected a factor >= 1", "got 0.5"});
  require_config_error(with_model("positional = \"rope\"\nrope_scaling = \"yarn\""), {},
                       {"model.rope_scaling: expected one of none, interpolation, ntk"});
  {
    TempDir ok;
    CHECK(load_config(ok.write("cfg.toml", with_model("positional = \"rope\"\nrope_scaling = \"ntk\"\n"
                                                       "rope_factor = 4.0\nmax_len = 64\nattention_window = 64")))
              .model.attention_window == 64);
  }
  require_config_error(kRequired, {"data.test_src=t.de"}, {"data.test_src", "set both or neither"});
  require_config_error(kRequired, {"train.warmup_steps=0"}, {"--set train.warmup_steps=0: expected a positive integer"});
  // With a cosine schedule no warm-up is allowed.
  TempDir dir;
  CHECK(load_config(dir.write("cfg.toml", kRequired), {"train.schedule=cosine", "train.warmup_steps=0"})
            .train.warmup_steps == 0);
}

TEST_CASE("config rejects malformed set overrides", "[config][errors]") {
  require_config_error(kRequired, {"lr0.5"}, {"cfg.toml: --set lr0.5: expected section.key=value"});
  require_config_error(kRequired, {"lr=0.5"}, {"--set lr=0.5: expected section.key=value"});
  require_config_error(kRequired, {".lr=0.5"}, {"expected section.key=value"});
  require_config_error(kRequired, {"train.=0.5"}, {"expected section.key=value"});
  require_config_error(kRequired, {"trian.lr=0.5"}, {"--set trian.lr=0.5: unknown section [trian]", "did you mean [train]?"});
  require_config_error(kRequired, {"train.lrr=0.5"}, {"unknown key train.lrr", "did you mean train.lr?"});
  require_config_error(kRequired, {"train.max_steps=lots"},
                       {"--set train.max_steps=lots: expected an integer, got a string"});
  require_config_error(kRequired, {"model.n_heads=7"}, {"--set model.n_heads=7: d_model 256 is not divisible by n_heads 7"});
}

TEST_CASE("config accepts positional none and lists it for an unknown value", "[config][positional]") {
  TempDir dir;
  CHECK(load_config(dir.write("cfg.toml", with_model("positional = \"none\"")), {}).model.positional == "none");
  CHECK(load_config(dir.write("cfg2.toml", kRequired), {"model.positional=none"}).model.positional == "none");
  require_config_error(with_model("positional = \"absolute\""), {},
                       {"model.positional: expected one of sinusoidal, learned, rope, alibi, none, got \"absolute\""});
}

TEST_CASE("config reads arch rnn with its cell and attention, and to_toml round trips it", "[config]") {
  TempDir dir;
  // the defaults: an lstm with additive attention
  const Config plain = load_config(dir.write("plain.toml", with_model("arch = \"rnn\"")));
  CHECK(plain.model.arch == "rnn");
  CHECK(plain.model.rnn_cell == "lstm");
  CHECK(plain.model.rnn_attention == "additive");
  // every cell and attention is read, from the file and from --set; the Transformer's relations
  // (d_model % n_heads) are not asked of an rnn model, which has no heads
  const Config gru = load_config(dir.write("gru.toml", with_model("arch = \"rnn\"\nrnn_cell = \"gru\"\nrnn_attention = \"dot\"\n"
                                                                  "d_model = 250\nn_heads = 8")),
                                 {"model.rnn_attention=general"});
  CHECK(gru.model.rnn_cell == "gru");
  CHECK(gru.model.rnn_attention == "general");
  CHECK(gru.model.d_model == 250);
  for (const char* cell : {"lstm", "gru", "rnn"})
    for (const char* attention : {"none", "additive", "dot", "general"}) {
      const Config c = load_config(dir.write("each.toml", with_model("arch = \"rnn\"")),
                                   {std::string("model.rnn_cell=") + cell, std::string("model.rnn_attention=") + attention});
      CHECK(c.model.rnn_cell == cell);
      CHECK(c.model.rnn_attention == attention);
    }
  // written out with both keys and read back equal, from another folder
  const std::string written = to_toml(gru);
  CHECK_THAT(written, Contains("arch = \"rnn\"") && Contains("rnn_cell = \"gru\"") && Contains("rnn_attention = \"general\""));
  const Config reloaded = load_config(dir.write("b/config.toml", written));
  CHECK(reloaded == gru);
  CHECK(to_toml(reloaded) == written);
  // a Transformer's config.toml leaves the rnn keys out, so that it loads again
  const Config transformer = load_config(dir.write("t.toml", kRequired));
  const std::string transformer_toml = to_toml(transformer);
  CHECK_THAT(transformer_toml, !Contains("rnn_cell") && !Contains("rnn_attention"));
  CHECK(load_config(dir.write("c/config.toml", transformer_toml)) == transformer);
}

TEST_CASE("config rejects an unknown rnn option and an rnn option under another arch", "[config][errors]") {
  // not one of the listed values: the key, the values and what was found
  require_config_error(with_model("arch = \"rnn\"\nrnn_attention = \"bahdanau\""), {},
                       {"cfg.toml:3: model.rnn_attention: expected one of none, additive, dot, general, got \"bahdanau\""});
  require_config_error(with_model("arch = \"rnn\""), {"model.rnn_attention=bahdanau"},
                       {"--set model.rnn_attention=bahdanau: expected one of none, additive, dot, general, got \"bahdanau\""});
  require_config_error(with_model("arch = \"rnn\"\nrnn_cell = \"elman\""), {},
                       {"cfg.toml:3: model.rnn_cell: expected one of lstm, gru, rnn, got \"elman\""});
  require_config_error(with_model("arch = \"recurrent\""), {},
                       {"model.arch: expected one of encoder-decoder, decoder-only, encoder-only, rnn, got \"recurrent\""});
  // an rnn key in a Transformer's config, even at its default value, in the file or from --set
  const std::string ignored = "only model.arch = \"rnn\" reads this key, but model.arch is \"encoder-decoder\"";
  require_config_error(with_model("rnn_attention = \"additive\""), {}, {"cfg.toml:2: model.rnn_attention: " + ignored});
  require_config_error(with_model("arch = \"decoder-only\"\nrnn_cell = \"lstm\""), {},
                       {"cfg.toml:3: model.rnn_cell: only model.arch = \"rnn\" reads this key, but model.arch is \"decoder-only\"",
                        "set model.arch = \"rnn\""});
  require_config_error(kRequired, {"model.rnn_cell=lstm"}, {"cfg.toml: --set model.rnn_cell=lstm: " + ignored});
  require_config_error(with_model("arch = \"rnn\"\nrnn_cell = \"gru\""), {"model.arch=encoder-decoder"},
                       {"cfg.toml:3: model.rnn_cell: " + ignored});
  // what an rnn model needs: an even width, and a translation task
  require_config_error(with_model("arch = \"rnn\"\nd_model = 255"), {},
                       {"cfg.toml:3: model.d_model: arch rnn needs an even d_model", "got 255"});
  require_config_error(with_model("arch = \"rnn\""), {"data.task=lm"},
                       {"--set data.task=lm: model.arch \"rnn\"", "only data.task = \"translation\", got \"lm\""});
  require_config_error(with_model("arch = \"rnn\""), {"run.attention_snapshots=true"},
                       {"--set run.attention_snapshots=true", "Transformer's attention heads", "got model.arch \"rnn\""});
}

// ---- where configs and corpora are found (train/data_folder.h) ----
// The test programs lie in the checkout's build tree, so the data folder is the checkout itself.

TEST_CASE("config given by name is found in the data folder's configs", "[config][install]") {
  const std::optional<sf::train::DataFolder> data = sf::train::find_data_folder();
  REQUIRE(data.has_value());
  CHECK_FALSE(data->installed);
  CHECK(fs::exists(data->corpora() / "multi30k" / "SOURCE.md"));
  const Config by_name = load_config("reverse");
  CHECK(by_name == load_config((data->configs() / "reverse.toml").string()));
  CHECK(by_name == load_config("reverse.toml"));
  REQUIRE_THROWS_WITH(load_config(""), Contains("got an empty string"));
  REQUIRE_THROWS_WITH(load_config("no-such-config"), Contains("no-such-config") && Contains(data->configs().string()) &&
                                                            Contains("scratchformer configs") && !Contains("\n"));
  bool listed = false;
  for (const sf::train::ConfigEntry& e : sf::train::list_configs()) listed = listed || (e.name == "quickstart" && !e.description.empty());
  CHECK(listed);
}

TEST_CASE("config copied out of the configs folder finds the shipped corpora, or names both places", "[config][install]") {
  const sf::train::DataFolder data = sf::train::data_folder();
  TempDir dir;
  std::ifstream in(data.configs() / "reverse.toml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Config copied = load_config(dir.write("copied.toml", text));
  CHECK(copied.missing_files.empty());
  CHECK(copied.data.train_src == (data.corpora() / "reverse" / "train.src").lexically_normal().string());
  CHECK_NOTHROW(sf::train::require_data_files(copied));

  std::string broken = text;
  broken.replace(broken.find("corpora/reverse/train.src"), 25, "corpora/nowhere/train.src");
  const Config missing = load_config(dir.write("broken.toml", broken));
  REQUIRE(missing.missing_files.size() == 1);
  const std::string& line = missing.missing_files.front();
  CHECK_THAT(line, Contains("broken.toml:") && Contains("data.train_src") &&
                       Contains((dir.path / "../data/corpora/nowhere/train.src").lexically_normal().string()) &&
                       Contains((data.corpora() / "nowhere" / "train.src").lexically_normal().string()));
  REQUIRE_THROWS_AS(sf::train::require_data_files(missing), ConfigError);
  CHECK(missing.run.dir == (dir.path / "../runs/reverse").lexically_normal().string());  // a checkout: run.dir as written
}
