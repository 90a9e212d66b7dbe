// Where the shipped configs and corpora are: found when the program runs, never compiled in.
//
// Two layouts hold them, with the same folders inside:
//
//   a checkout        ROOT/configs/quickstart.toml     ROOT/data/corpora/multi30k/train.de
//                     (the program at ROOT/build/release/scratchformer)
//   an installation   PREFIX/share/scratchformer/configs/...   .../data/corpora/...
//                     (the program at PREFIX/bin/scratchformer; read-only for a student)
//
// find_data_folder() looks, in order: in $SCRATCHFORMER_DATA if it is set; then upward from the
// folder of the running program (/proc/self/exe), at most four levels, for either layout. So a
// config given by name (`train --config quickstart`), the demos' corpora and the explorer's
// configs are found from any current folder, and a package unpacked under another root (dpkg -x)
// works where it lies.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sf::train {

struct DataFolder {
  std::filesystem::path root;  // holds configs/ and data/corpora/
  bool installed = false;      // PREFIX/share/scratchformer (not a checkout): runs go to ./runs/

  std::filesystem::path configs() const { return root / "configs"; }
  std::filesystem::path corpora() const { return root / "data" / "corpora"; }
};

// The folder of the running program, or empty where /proc/self/exe cannot be read.
std::filesystem::path program_folder();

// The data folder, or nothing when neither $SCRATCHFORMER_DATA nor the program's place has one.
std::optional<DataFolder> find_data_folder();

// The data folder; throws std::runtime_error naming every place looked in when there is none.
DataFolder data_folder();

// The shipped corpora's folder (data_folder().corpora()) unless `given` names one.
std::string corpora_dir(const std::string& given = "");

// The configs in the data folder, sorted by name, each with its file's first comment line
// ("quickstart: German -> English on Multi30k ..."), for `scratchformer configs`.
struct ConfigEntry {
  std::string name;         // "quickstart" (the file is quickstart.toml)
  std::string path;         // absolute
  std::string description;  // the first line, without "# " and without "name: "
};
std::vector<ConfigEntry> list_configs();

// `--config ARG` as a file: ARG itself when it names a file, else a bare name (no '/', with or
// without .toml) found in the data folder's configs/. Throws ConfigError naming both places.
std::string find_config_file(const std::string& arg);

}  // namespace sf::train
