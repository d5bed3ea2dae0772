#pragma once
#include "verl/core/batch.h"
