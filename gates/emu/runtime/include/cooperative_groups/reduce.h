// Resolves to the KLineage CUDA emulator runtime (cg::reduce lives in klemu/cg.h).
#pragma once
#include "../klemu.h"
