#include "verl/models/decoder.h"
