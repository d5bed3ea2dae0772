#include "verl/core/batch.h"

#include <gtest/gtest.h>
TEST(Batch, Make) { MakeBatch(); }
