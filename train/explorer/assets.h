// The explorer's page (train/explorer/web: index.html, app.js, i18n.js, style.css) as bytes
// inside the binary. The build turns the folder into a generated C++ file
// (train/explorer/embed_assets.cmake), so `scratchformer serve` and `scratchformer report` need
// no file of the source tree at run time and fetch nothing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sf::explorer {

struct Asset {
  std::string_view name;   // the file name in web/: "app.js"
  std::string_view bytes;  // its exact content
};

// Every embedded file, sorted by name (generated: explorer_assets.cpp in the build tree).
const std::vector<Asset>& embedded_assets();

// The embedded file called `name`, or nullptr.
inline const Asset* find_asset(std::string_view name) {
  for (const Asset& a : embedded_assets())
    if (a.name == name) return &a;
  return nullptr;
}

// The HTTP Content-Type of a file by its extension: "text/html; charset=utf-8" for .html,
// "application/octet-stream" for an extension not in the table (api.cpp).
std::string content_type_for(std::string_view file_name);

}  // namespace sf::explorer
