// The fixture's stand-in for autograd/exercise.h.
#pragma once
namespace sf::exercise {
[[noreturn]] void not_implemented(const char* word, const char* function, const char* file);
}
