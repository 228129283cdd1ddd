#include "machine_limits.h"
