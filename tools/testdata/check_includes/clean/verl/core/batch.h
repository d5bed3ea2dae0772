#pragma once
#include "verl/core/status.h"
Status MakeBatch();
