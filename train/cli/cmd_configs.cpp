// `scratchformer configs`: the configs that `train --config NAME` finds by name, with each file's
// first line, and the folder they are in (train/data_folder.h: the checkout's configs/, or
// PREFIX/share/scratchformer/configs once installed).
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/data_folder.h"

#include <algorithm>
#include <iostream>
#include <string>

namespace sf::cli {

namespace {

int run_configs(const std::string& lang) {
  const train::DataFolder data = train::data_folder();
  const std::vector<train::ConfigEntry> configs = train::list_configs();
  const bool zh = chinese_output(lang);
  std::cout << (zh ? "配置（" : "configs in ") << data.configs().string() << (zh ? "）" : "") << ":\n";
  std::size_t width = 0;
  for (const train::ConfigEntry& c : configs) width = std::max(width, c.name.size());
  for (const train::ConfigEntry& c : configs)
    std::cout << "  " << c.name << std::string(width - c.name.size() + 2, ' ') << c.description << "\n";
  std::cout << (zh ? "用法：scratchformer train --config NAME（例如 quickstart）；复制一个到自己的文件夹即可修改"
                   : "use: scratchformer train --config NAME (e.g. quickstart); copy one to a folder of yours to edit it")
            << "\n";
  if (data.installed)
    std::cout << (zh ? "安装版的配置是只读的：运行写入当前文件夹下的 runs/NAME\n"
                     : "installed configs are read-only: their runs are written to runs/NAME under the current folder\n");
  return 0;
}

}  // namespace

Command add_configs_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("configs", "List the configs `train --config NAME` finds by name, and where they are");
  auto lang = std::make_shared<std::string>("auto");
  add_lang_option(*cmd, *lang);
  return {cmd, [lang] { return run_configs(*lang); }};
}

}  // namespace sf::cli
