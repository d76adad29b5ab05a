// add() and operator+ are part of the broadcasting binary ops (ops/binary/binary.h); this header stays for
// code that includes it.
#pragma once
#include "ops/binary/binary.h"
