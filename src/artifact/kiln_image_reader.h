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
// The same from bytes already mapped (a range of another file: MappedFile::open_range).
Result<KilnImage> open_kiln_image(std::shared_ptr<const MappedFile> bytes, bool verify, bool check_target = true);

}  // namespace kiln
