// Placeholder: being written.
#include "test_util.h"
