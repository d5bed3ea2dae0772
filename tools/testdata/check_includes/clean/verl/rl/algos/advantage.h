#pragma once
#include "verl/core/status.h"
