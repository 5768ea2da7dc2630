// Pieces of the self-contained HTML pages kiln writes (perf/html_report.h, perf/tune_report.h).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace kiln::html {

// printf into a string (at most 1023 characters: one SVG element or table row).
inline std::string fmt(const char* f, ...) {
  char b[1024];
  va_list a;
  va_start(a, f);
  std::vsnprintf(b, sizeof b, f, a);
  va_end(a);
  return b;
}

// Text as HTML: the characters markup gives a meaning escaped.
inline std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// The head every page shares: the policy forbids every fetch, so the page is whole (a browser says
// so if it were not), and one style.
inline std::string page_head(const std::string& title, const std::string& extra_style = "") {
  return "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
         "<title>" + esc(title) + "</title><style>"
         "body{font:14px sans-serif;margin:20px;color:#222}table{border-collapse:collapse;margin:6px 0 14px}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}"
         "svg text{font:11px sans-serif}" + extra_style + "</style></head><body>";
}

}  // namespace kiln::html
