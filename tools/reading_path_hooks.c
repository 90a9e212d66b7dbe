/* The order half of tools/reading_path.py: which function a run enters first, and in which stage.
 *
 * gcov counts how often each function ran, not in which order. A build compiled with
 * -finstrument-functions calls __cyg_profile_func_enter(fn, caller) on entering every function
 * (and __cyg_profile_func_exit on leaving it); glibc's versions do nothing. tools/reading_path.py
 * builds this file into a shared library and starts `scratchformer train` with LD_PRELOAD naming
 * it, so these versions run instead. They record, in memory:
 *
 *   F seq offset phase    the first call of a function in the whole run, and the phase of the
 *                         command it came in (config, tokenizer, corpus, ...);
 *   S step seq offset stage phase
 *                         the first call of a function in each training step, the stage of the
 *                         step it came in (batch, forward, loss, backward, optimizer, ...) and
 *                         the phase (so the script can tell the step from what follows the last).
 *
 * seq counts calls, so sorting by it gives first-call order. offset is the function's address
 * minus the executable's load address: the value `nm` prints for its symbol. The script says
 * which functions mark a stage in RP_MARKERS (below); the marks are sticky: a function belongs to
 * the stage of the marker entered last before it. At exit the records go to the file RP_OUTPUT.
 *
 * RP_MARKERS: comma-separated entries `offset:kind:on_enter:on_exit`, offset in hex, kind P
 * (sets the phase), S (sets the stage) or T (a new step begins, and the stage becomes on_enter);
 * on_enter and on_exit are stage or phase numbers, -1 for no change. One function may carry
 * several markers (the loop's first call is a T and a P marker).
 *
 * Single-threaded in practice (the reference build runs one thread; the script sets
 * run.threads = 1), but a spin lock keeps the table sound if another thread calls in.
 * Nothing here may be instrumented itself: the script compiles it without
 * -finstrument-functions, and every function carries no_instrument_function besides.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINST __attribute__((no_instrument_function))

typedef struct {
  uintptr_t addr;  /* 0: empty slot */
  int64_t last_step;  /* the step of the last S record, -1 none */
  int marker;  /* 1: some marker names this function */
} Slot;

typedef struct {
  uintptr_t addr;
  char kind;
  int on_enter, on_exit;
} Marker;

enum { kMaxMarkers = 256 };
static Marker markers[kMaxMarkers];
static int n_markers = 0;

static Slot* table = NULL;
static size_t table_size = 0, table_used = 0;  /* table_size: a power of two */

static char* records = NULL;  /* the F and S lines */
static size_t records_len = 0, records_cap = 0;

static uintptr_t base = 0;  /* the executable's load address */
static uint64_t seq = 0;
static int64_t step = -1;  /* -1 before the first training step */
static int phase = 0, stage = 0;
static int enabled = 0;
static volatile int lock = 0;

static NOINST int first_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  *(uintptr_t*)data = info->dlpi_addr;  /* the first object is the executable */
  return 1;
}

static NOINST void append(const char* line) {
  const size_t n = strlen(line);
  if (records_len + n + 1 > records_cap) {
    records_cap = records_cap ? 2 * records_cap : 1 << 20;
    while (records_cap < records_len + n + 1) records_cap *= 2;
    records = realloc(records, records_cap);
    if (!records) abort();
  }
  memcpy(records + records_len, line, n + 1);
  records_len += n;
}

static NOINST Slot* find(uintptr_t addr, int* inserted);

static NOINST void grow(void) {
  Slot* old = table;
  const size_t old_size = table_size;
  table_size = old_size ? 2 * old_size : 1 << 14;
  table = calloc(table_size, sizeof(Slot));
  if (!table) abort();
  table_used = 0;
  for (size_t i = 0; i < old_size; ++i) {
    if (!old[i].addr) continue;
    int ins;
    Slot* s = find(old[i].addr, &ins);
    s->last_step = old[i].last_step;
    s->marker = old[i].marker;
  }
  free(old);
}

static NOINST Slot* find(uintptr_t addr, int* inserted) {
  if (2 * (table_used + 1) > table_size) grow();
  size_t i = (size_t)((addr >> 2) * 0x9E3779B97F4A7C15ull) & (table_size - 1);
  for (;; i = (i + 1) & (table_size - 1)) {
    if (table[i].addr == addr) {
      *inserted = 0;
      return &table[i];
    }
    if (!table[i].addr) break;
  }
  table[i].addr = addr;
  table[i].last_step = -1;
  table[i].marker = -1;
  for (int m = 0; m < n_markers; ++m)
    if (markers[m].addr == addr - base) table[i].marker = 1;
  ++table_used;
  *inserted = 1;
  return &table[i];
}

static NOINST void apply(int value, char kind) {
  if (value < 0) return;
  if (kind == 'P') phase = value;
  else stage = value;
}

NOINST void __cyg_profile_func_enter(void* fn, void* caller) {
  (void)caller;
  if (!enabled) return;
  while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {
  }
  const uintptr_t addr = (uintptr_t)fn;
  int inserted;
  Slot* s = find(addr, &inserted);
  ++seq;
  char line[96];
  if (s->marker > 0) {  /* a marker sets the stage before its own record: it is part of it */
    for (int i = 0; i < n_markers; ++i) {
      const Marker* m = &markers[i];
      if (m->addr != addr - base) continue;
      if (m->kind == 'T') ++step;
      apply(m->on_enter, m->kind);
    }
  }
  if (inserted) {
    snprintf(line, sizeof line, "F %llu %llx %d\n", (unsigned long long)seq, (unsigned long long)(addr - base), phase);
    append(line);
  }
  if (step >= 0 && s->last_step != step) {
    s->last_step = step;
    snprintf(line, sizeof line, "S %lld %llu %llx %d %d\n", (long long)step, (unsigned long long)seq,
             (unsigned long long)(addr - base), stage, phase);
    append(line);
  }
  __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

NOINST void __cyg_profile_func_exit(void* fn, void* caller) {
  (void)caller;
  if (!enabled) return;
  const uintptr_t offset = (uintptr_t)fn - base;
  for (int m = 0; m < n_markers; ++m)
    if (markers[m].addr == offset && markers[m].on_exit >= 0) {
      while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {
      }
      apply(markers[m].on_exit, markers[m].kind);
      __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
    }
}

static NOINST void parse_markers(const char* text) {
  const char* p = text;
  while (p && *p && n_markers < kMaxMarkers) {
    unsigned long long addr;
    char kind;
    int on_enter, on_exit, used = 0;
    if (sscanf(p, "%llx:%c:%d:%d%n", &addr, &kind, &on_enter, &on_exit, &used) != 4) break;
    markers[n_markers++] = (Marker){(uintptr_t)addr, kind, on_enter, on_exit};
    p = strchr(p + used, ',');
    if (p) ++p;
  }
}

__attribute__((constructor)) static NOINST void start(void) {
  if (!getenv("RP_OUTPUT")) return;
  dl_iterate_phdr(first_object, &base);
  parse_markers(getenv("RP_MARKERS"));
  grow();
  enabled = 1;
}

__attribute__((destructor)) static NOINST void finish(void) {
  const char* path = getenv("RP_OUTPUT");
  if (!enabled || !path) return;
  enabled = 0;
  FILE* out = fopen(path, "w");
  if (!out) {
    fprintf(stderr, "reading_path_hooks: cannot write %s\n", path);
    return;
  }
  fwrite(records, 1, records_len, out);
  fclose(out);
}
