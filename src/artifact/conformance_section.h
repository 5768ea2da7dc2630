// The .kiln conformance section: how far the compiled (quantized) program is from the float
// program of the same model, measured by the compiler on one or more texts (a built-in one, and
// the user's --eval text): top-1 agreement, mean KL, both perplexities, the layers that add the
// most error, and whether the tokenizer gives the text back. JSON; a file without the section
// (written before it existed, or compiled with --no-conformance) reads as having no report.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

struct ConformanceLayer {
  int layer = 0;
  double added_error = 0;     // the relative error of its hidden state minus the layer before's
  double relative_error = 0;  // ||quantized - float|| / ||float|| of its hidden state, mean over tokens
};

struct ConformanceText {
  std::string name;  // "built-in", or the --eval file's name (without its folder)
  int64_t tokens = 0;
  int64_t scored = 0;
  int n_ctx = 0;
  double top1_agreement = 0;  // fraction of scored tokens whose most likely next token is the float's
  double kl = 0;              // mean KL(float || quantized), nats
  double max_kl = 0;
  double ppl_reference = 0;   // the float program's perplexity on the text
  double ppl_quantized = 0;
  std::vector<ConformanceLayer> worst_layers;  // most added error first, at most three
  bool round_trip = false;    // the tokenizer's decode(encode(text)) is the text
  int64_t round_trip_mismatch = -1;  // the first byte where it differs; -1 when it does not
};

struct ConformanceReport {
  std::string reference = "f32";  // the scheme of the program compared against
  std::vector<ConformanceText> texts;  // the built-in text first
  // The text the headline numbers (C API, inspect's first line) come from: the --eval text when
  // one was given, else the built-in one.
  const ConformanceText& headline() const { return texts.back(); }
};

std::string encode_conformance_section(const ConformanceReport& report);
// `where` names the file in errors. A section with no texts is corrupt.
Result<ConformanceReport> decode_conformance_section(std::span<const uint8_t> bytes, const std::string& where);

}  // namespace kiln
