// KLineage CUDA emulator: everything a translated kernel file sees. Force-included first.
#pragma once
#ifndef KLEMU_H_INCLUDED
#define KLEMU_H_INCLUDED
#include "klemu/core.h"
#include "klemu/math.h"
#include "klemu/fp16.h"
#include "klemu/cg.h"
#include "klemu/host.h"
#include "klemu/tc.h"
#include "klemu/hopper.h"
#endif
