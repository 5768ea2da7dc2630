// Tests only: amx.cpp compiled with the tile instructions modelled in software, so that its
// kernels run against the reference on CPUs without AMX (see amx_emulation.h).
#define KILN_AMX_EMULATION 1
#include "backends/cpu/x86/amx.cpp"  // NOLINT(bugprone-suspicious-include): the same kernels, built twice
