// Placeholder: filled in by the demo's author.
#include <ostream>
#include <stdexcept>

#include "train/lessons/demo.h"

namespace sf::lessons {

int run_autograd_demo(const DemoOptions&, std::ostream&) { throw std::runtime_error("demo autograd: not written yet"); }

}  // namespace sf::lessons
