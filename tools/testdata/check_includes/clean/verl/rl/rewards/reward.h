#pragma once
#include "verl/rl/algos/advantage.h"
