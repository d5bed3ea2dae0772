#include "verl/core/batch.h"

#include <stdio.h>
#include <zlib.h>

#include "verl/core/wire.pb.h"
Status MakeBatch() { return Status(); }
