// `scratchformer report --run DIR --out report.html`: the explorer's views that need no live
// model, as ONE self-contained HTML file to open on a machine with no server or to send to
// students. The page is the explorer's own (train/explorer/web, embedded: assets.h) with
// style.css, i18n.js and app.js inlined, and one more script that defines
// window.SF_REPORT_DATA; app.js reads that object instead of calling the HTTP API:
//
//   SF_REPORT_DATA = {version, report: true, run, runs: [run_summary],
//                     metrics: {RUN: tsv_rows}, layer_norms: {RUN: tsv_rows},
//                     snapshots: {RUN: {snapshots}},
//                     sentences: [{text, translate: <translate JSON> | {error},
//                                  attention: <attention JSON> | {error}}]}
//
// The sentences are translated (greedy, as `scratchformer translate --beam 1` does) and their
// attention computed now, with the functions of data.h, when a checkpoint is there. The file
// fetches nothing: no http(s) address, no /static/ link is left in it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sf::explorer {

using Json = nlohmann::json;

struct ReportOptions {
  std::string run_dir;         // --run: a run directory (metrics.tsv, layer_norms.tsv, snapshots.jsonl, checkpoints)
  std::string out;             // --out: the HTML file to write
  std::string checkpoint;      // --checkpoint: "" = the run's checkpoint-best, else checkpoint-last, else none
  std::string sentences_file;  // --sentences: one sentence a line; "" = the first lines of the config's valid source
  std::string version;         // shown in the page's footer
};

// Sentences used when --sentences is not given (from the run's validation source).
inline constexpr std::size_t kDefaultReportSentences = 5;

// The sentences of a --sentences file: non-empty lines, at most kMaxReportSentences (api.h),
// each at most kMaxTextBytes; throws std::invalid_argument with one line otherwise.
std::vector<std::string> read_report_sentences(const std::string& path);

// Everything the page shows, as the SF_REPORT_DATA object above.
Json report_data(const ReportOptions& options);

// The page with its files inlined and `data` as window.SF_REPORT_DATA.
std::string report_html(const Json& data);

// report_data + report_html, written to options.out. Throws std::invalid_argument (bad input)
// or std::runtime_error (a file that cannot be read or written), each one line.
void write_report(const ReportOptions& options);

}  // namespace sf::explorer
