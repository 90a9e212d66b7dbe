// The classroom's language and UTF-8 text in columns (lang.h).
#include "train/classroom/lang.h"

namespace sf::train {

std::string text(Lang lang, std::string_view en, std::string_view zh) { return std::string(lang == Lang::Zh ? zh : en); }

bool next_code_point(std::string_view s, std::size_t& i, char32_t& cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  int extra;
  char32_t min_value;
  if (b0 < 0x80) return cp = b0, ++i, true;
  if ((b0 & 0xE0) == 0xC0) extra = 1, cp = b0 & 0x1F, min_value = 0x80;
  else if ((b0 & 0xF0) == 0xE0) extra = 2, cp = b0 & 0x0F, min_value = 0x800;
  else if ((b0 & 0xF8) == 0xF0) extra = 3, cp = b0 & 0x07, min_value = 0x10000;
  else return ++i, false;
  if (i + extra >= s.size()) return ++i, false;  // truncated at the end of the string
  for (int k = 1; k <= extra; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return ++i, false;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min_value || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return ++i, false;
  i += extra + 1;
  return true;
}

// The main East Asian Wide blocks of Unicode.
bool is_wide(char32_t cp) {
  return (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
         (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1FAFF) || (cp >= 0x20000 && cp <= 0x3FFFD);
}

bool is_zero_width(char32_t cp) {
  return (cp >= 0x0300 && cp <= 0x036F) ||  // combining diacritical marks
         (cp >= 0x200B && cp <= 0x200F) ||  // zero-width space, (non-)joiner, direction marks
         (cp >= 0x202A && cp <= 0x202E) ||  // direction embeddings and overrides
         (cp >= 0x2060 && cp <= 0x2064) ||  // word joiner, invisible operators
         (cp >= 0x20D0 && cp <= 0x20FF) ||  // combining marks for symbols
         (cp >= 0xFE00 && cp <= 0xFE0F) ||  // variation selectors
         (cp >= 0xFE20 && cp <= 0xFE2F) ||  // combining half marks
         cp == 0xFEFF;                      // byte-order mark (zero-width no-break space)
}

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp;
    if (!next_code_point(text, i, cp)) ++width;  // an invalid byte: the terminal shows one replacement mark
    else width += is_zero_width(cp) ? 0 : is_wide(cp) ? 2 : 1;
  }
  return width;
}

std::string pad_to_width(const std::string& text, std::size_t width) {
  const std::size_t w = display_width(text);
  return w >= width ? text : text + std::string(width - w, ' ');
}

std::string pad_left_to_width(const std::string& text, std::size_t width) {
  const std::size_t w = display_width(text);
  return w >= width ? text : std::string(width - w, ' ') + text;
}

}  // namespace sf::train
