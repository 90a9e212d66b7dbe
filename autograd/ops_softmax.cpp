// Placeholder: being written.
#include "autograd/ops.h"
