// Text as Python's str sees it, for the chat-template engine: UTF-8 held as code points,
// whitespace, case mapping, repr() of strings and floats, and json.dumps string quoting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jinja {

// Decodes valid UTF-8 (the engine checks its inputs once; every string it makes stays valid).
std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
size_t count_code_points(std::string_view s);
// The byte offset of code point `index` (count_code_points(s) gives s.size()).
size_t byte_offset_of(std::string_view s, size_t index);

// Python's str.isspace() for one code point (what strip(), split() and \s use).
bool py_isspace(char32_t c);
// Python's str.isprintable() for one code point, for the code points templates meet.
bool py_isprintable(char32_t c);
bool py_is_cased_lower(char32_t c);
bool py_is_cased_upper(char32_t c);

// str.upper() / str.lower() / str.capitalize() / str.title() / str.swapcase(). Case mapping
// covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and full-width Latin; other scripts
// pass through unchanged.
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);
std::string py_swapcase(std::string_view s);

// str.strip(chars) and friends: `chars` null strips whitespace.
std::string py_strip(std::string_view s, const std::u32string* chars, bool left, bool right);
// str.split(sep, maxsplit): sep null splits on runs of whitespace. sep must not be empty.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
// str.replace(old, new, count): count < 0 replaces all; an empty `old` inserts between code points.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// str.find / str.rfind in code points, -1 when absent.
int64_t py_find(std::string_view s, std::string_view sub, bool reverse);
int64_t py_count(std::string_view s, std::string_view sub);

// repr(str): quotes and escapes as CPython does.
std::string py_repr_str(std::string_view s);
// repr(float) (also what str() and json.dumps print): shortest round-trip digits.
std::string py_float_repr(double v);
// json.dumps of a string, with ensure_ascii as asked.
void json_quote(std::string& out, std::string_view s, bool ensure_ascii);
// markupsafe.escape of a string: & < > " ' as entities.
std::string html_escape(std::string_view s);

}  // namespace kiln::jinja
