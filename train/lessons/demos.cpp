// Placeholder registry: filled in by the demos' author.
#include "train/lessons/demo.h"

namespace sf::lessons {

const std::vector<Demo>& demos() {
  static const std::vector<Demo> all;
  return all;
}

const Demo* find_demo(const std::string& name) {
  for (const Demo& d : demos())
    if (d.name == name) return &d;
  return nullptr;
}

std::string demo_svg_path(const DemoOptions& options, const std::string& name) {
  return options.out.empty() ? "demo-" + name + ".svg" : options.out;
}

}  // namespace sf::lessons
