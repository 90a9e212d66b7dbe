// Placeholder: the exercises' gradcheck entries, filled in by the exercises' author.
#include "train/classroom/gradcheck_suite.h"

namespace sf::train {

std::vector<GradcheckEntry> exercise_gradcheck_entries() { return {}; }

}  // namespace sf::train
