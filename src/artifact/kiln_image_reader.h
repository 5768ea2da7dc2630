// Opens a .kiln context binary as a program image: a map and a check, no per-weight work.
#pragma once

#include <memory>
#include <string>

#include "artifact/kiln_file.h"
#include "artifact/program_image.h"

namespace kiln {

struct KilnImage {
  std::shared_ptr<const KilnFile> file;
  ProgramImage image;
};

// `verify` also checks the weights' checksum (reads every page); `check_target` refuses a file
// whose target needs CPU features this machine may not use (off: for inspecting it).
Result<KilnImage> open_kiln_image(const std::string& path, bool verify, bool check_target = true);
Result<KilnImage> open_kiln_image(std::shared_ptr<const KilnFile> file);

}  // namespace kiln
