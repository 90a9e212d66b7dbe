// Loads the gdb pretty-printers (tools/gdb/scratchformer_printers.py) by themselves.
//
// This file adds one entry to the ELF section .debug_gdb_scripts of every program that links
// autograd: the absolute path of the printers' script in the source tree. When gdb loads such a
// program it sources every script named there, provided the script lies in an auto-load safe
// path; one line in ~/.gdbinit allows the repository:
//
//     add-auto-load-safe-path /path/to/scratchformer
//
// Only the file's name is embedded, no code: a printer fixed in the source tree is picked up by
// the next gdb session without rebuilding. The section is not loaded into memory when the
// program runs, and `strip --strip-debug` removes it with the rest of the debug information.
// The entry format and the macro it follows are in the gdb manual, "The .debug_gdb_scripts
// section". See docs/debugging.md.

// SCRATCHFORMER_GDB_PRINTERS, the script's path as a string literal, is set by
// autograd/CMakeLists.txt. Without it (or on a non-ELF platform) nothing is embedded.
#if defined(__ELF__) && defined(SCRATCHFORMER_GDB_PRINTERS)
// "MS" (mergeable strings): the linker keeps one copy when several objects name the same file.
// .byte 1 is SECTION_SCRIPT_ID_PYTHON_FILE: the entry is the name of a Python script.
asm(".pushsection \".debug_gdb_scripts\", \"MS\", @progbits, 1\n"
    ".byte 1\n"
    ".asciz \"" SCRATCHFORMER_GDB_PRINTERS "\"\n"
    ".popsection\n");
#endif

// autograd is a static library, and the linker takes an object out of it only when the program
// refers to one of its symbols. autograd/CMakeLists.txt makes every program that links autograd
// ask for this one (-u sf_gdb_autoload), so the section above reaches every executable.
extern "C" {
extern const char sf_gdb_autoload;
const char sf_gdb_autoload = 0;
}
