// Resolves to the KLineage CUDA emulator runtime.
#pragma once
#include "klemu.h"
