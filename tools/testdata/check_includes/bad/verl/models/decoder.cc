#include "verl/models/decoder.h"

#include "verl/core/status.h"
#include "verl/models/orphan.h"
