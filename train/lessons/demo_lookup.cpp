// Placeholder: filled in by the demo's author.
#include <ostream>
#include <stdexcept>

#include "train/lessons/demo.h"

namespace sf::lessons {

int run_lookup_demo(const DemoOptions&, std::ostream&) { throw std::runtime_error("demo lookup: not written yet"); }

}  // namespace sf::lessons
