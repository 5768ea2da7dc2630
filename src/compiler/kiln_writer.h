// Writes a compiled program image as a .kiln context binary.
#pragma once

#include <functional>
#include <string>

#include "compiler/driver.h"
#include "artifact/kiln_image_writer.h"
#include "artifact/program_image.h"

namespace kiln {

// The machine a .kiln is made for: "auto" (any CPU: the best kernels of the machine that opens
// it; what the file needs, which for the cpu back end's layouts is nothing), "native" (this
// CPU), "generic" (no ISA extension), "x86-avx2", "x86-avx512", "x86-amx", "arm64-dotprod",
// "arm64-i8mm". A named target records the CPU features of the kernels that will run (such a
// .kiln opens only on a CPU that has them, and runs those kernels everywhere).
Result<KilnTarget> resolve_target(const std::string& name);

// What a .kiln names as its writer: "kiln 0.4.0".
std::string kiln_writer_name();

// The image with its compile report's totals (and the conformance report, when measured), written
// by this version of kiln.
Status write_kiln(const ProgramImage& image, const KilnTarget& target, const CompileReport& report,
                  const std::string& path, const std::function<void(double)>& progress = {},
                  const ConformanceReport* conformance = nullptr, const SourceRecord* source = nullptr);

}  // namespace kiln
