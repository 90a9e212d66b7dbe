// Placeholder: filled in by its author.
#include <catch2/catch.hpp>
