// Text as Python's str sees it, for the sacreBLEU-compatible metrics (bleu.cpp, chrf.cpp):
// UTF-8 decoded to code points, and Python's idea of whitespace. sacreBLEU works on Python
// strings, so both metrics must split and count exactly the code points Python would.
#pragma once

#include <string>

namespace sf::train {

// Strict UTF-8 decoding, as Python's bytes.decode("utf-8"): rejects stray continuation bytes,
// truncated sequences, overlong forms, surrogates and code points above U+10FFFF, throwing
// std::invalid_argument that names `what` and the byte offset ("corpus_bleu: hypothesis 3 is not
// valid UTF-8: bad byte sequence at byte 7 ...").
std::u32string decode_utf8(const std::string& text, const std::string& what);

// The UTF-8 bytes of code points (the inverse of decode_utf8).
std::string encode_utf8(const std::u32string& text);

// The code points for which Python's str.isspace() is true (so str.split() splits at them): ASCII
// \t \n \v \f \r, the separators U+001C..U+001F, space, NEL, no-break space, and the Unicode
// spaces (en/em/thin spaces, line and paragraph separators, narrow no-break space, ideographic
// space U+3000, ...).
bool is_python_space(char32_t c);

}  // namespace sf::train
