// The language of the classroom's output, and UTF-8 text in columns (namespace sf::train).
//
// The headings, captions and tables of `scratchformer gradcheck`, `summary`, `explain-batch`,
// `plot` and `attention` exist in English and in Chinese: the command's --lang en|zh|auto
// (train/cli/cli_util.h) picks a Lang, which is handed down as a plain argument to the function
// that writes the text. Each text is written once, at the place it is printed, with its
// translation beside it:
//
//   os << text(lang, "parameters", "参数量") << "\n";
//
// Error messages stay in English (one language to search for and to quote in a question).
//
// A Chinese character takes two columns of a terminal, a Latin letter or "▁" one, a zero-width
// space none: display_width() counts them, and pad_to_width() pads with spaces to a number of
// columns, so that tokens and headings in Chinese line up in columns.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sf::train {

// ---- the language ------------------------------------------------------------------------

enum class Lang {
  En,  // English: what every command prints by default
  Zh,  // simplified Chinese (简体中文)
};

// `en` or `zh`, whichever `lang` asks for.
std::string text(Lang lang, std::string_view en, std::string_view zh);

// ---- UTF-8 text in columns ---------------------------------------------------------------

// Decodes the code point starting at s[i] and advances i past it. Returns false (and advances i
// by one byte) for an invalid sequence: a stray continuation byte, a truncated sequence, an
// overlong encoding, a UTF-16 surrogate, or a value above U+10FFFF.
bool next_code_point(std::string_view s, std::size_t& i, char32_t& cp);

// East Asian wide characters (CJK ideographs and punctuation, Hangul, kana, full-width forms,
// emoji): two terminal columns, about 1 em in a picture.
bool is_wide(char32_t cp);

// Characters that take no column: combining marks, zero-width space and joiners, direction
// marks, variation selectors, the byte-order mark.
bool is_zero_width(char32_t cp);

// Columns `text` takes in a terminal: 2 per wide character, 0 per zero-width one, 1 for every
// other character and for every byte that is not valid UTF-8.
std::size_t display_width(std::string_view text);

// `text` followed by spaces up to `width` columns (unchanged when it is as wide or wider).
std::string pad_to_width(const std::string& text, std::size_t width);
// Spaces, then `text`, up to `width` columns: right-aligned (numbers in a column).
std::string pad_left_to_width(const std::string& text, std::size_t width);

}  // namespace sf::train
