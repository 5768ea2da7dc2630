// Writes a program image as a .kiln context binary (artifact/kiln_file.h is the container).
#pragma once

#include <functional>
#include <string>

#include "artifact/conformance_section.h"
#include "artifact/kiln_file.h"
#include "artifact/program_image.h"
#include "artifact/quant_record_section.h"
#include "artifact/source_section.h"

namespace kiln {

// Sections: config, tokenizer, program, memory plan, quantization record, the conformance report
// and the source record when there are, then each weight. `writer` names the program that wrote the file
// ("kiln 0.4.0"). Written to a temporary file and renamed.
Status write_kiln_image(const ProgramImage& image, const KilnTarget& target, const QuantTotals& totals,
                        const std::string& writer, const std::string& path,
                        const std::function<void(double)>& progress = {},
                        const ConformanceReport* conformance = nullptr, const SourceRecord* source = nullptr);

}  // namespace kiln
