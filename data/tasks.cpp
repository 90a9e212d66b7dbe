#include "data/tasks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "data/tokenizer.h"

namespace sf::data {

namespace {

void check_rows(const char* what, std::size_t rows, std::size_t indices) {
  if (rows == 0 || rows != indices)
    throw std::invalid_argument(std::string(what) + ": expected the same positive number of rows and indices, got " +
                                std::to_string(rows) + " and " + std::to_string(indices));
}

// sequences[b] (input, output) of one row each -> tgt_in, tgt_out (B,T) padded, the padding
// mask of tgt_in and the count of non-pad outputs.
Batch pack_decoder_rows(const std::vector<std::vector<std::int64_t>>& in, const std::vector<std::vector<std::int64_t>>& out,
                        const std::vector<std::int64_t>& indices) {
  const auto rows = static_cast<std::int64_t>(in.size());
  std::int64_t T = 0;
  for (const auto& row : in) T = std::max<std::int64_t>(T, static_cast<std::int64_t>(row.size()));
  Batch batch;
  batch.indices = indices;
  batch.tgt_in = full({rows, T}, static_cast<double>(kPadId), Dtype::Int64);
  batch.tgt_out = full({rows, T}, static_cast<double>(kPadId), Dtype::Int64);
  batch.tgt_pad_mask = full({rows, 1, 1, T}, 1.0, Dtype::Bool);
  std::int64_t* in_data = batch.tgt_in.data<std::int64_t>();
  std::int64_t* out_data = batch.tgt_out.data<std::int64_t>();
  bool* mask = batch.tgt_pad_mask.data<bool>();
  for (std::int64_t b = 0; b < rows; ++b)
    for (std::size_t t = 0; t < in[b].size(); ++t) {
      in_data[b * T + t] = in[b][t];
      out_data[b * T + t] = out[b][t];
      mask[b * T + t] = false;
      batch.tgt_tokens += out[b][t] != kPadId;
    }
  return batch;
}

}  // namespace

// seqs[b]: (n_b) -> tgt_in = (BOS, x_1..x_n), tgt_out = (x_1..x_n, EOS)
Batch make_lm_batch(const std::vector<const std::vector<std::int64_t>*>& seqs, const std::vector<std::int64_t>& indices) {
  check_rows("make_lm_batch", seqs.size(), indices.size());
  std::vector<std::vector<std::int64_t>> in, out;
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const auto& x = *seqs[b];
    if (x.empty()) throw std::invalid_argument("make_lm_batch: row " + std::to_string(indices[b]) + " is empty");
    in.push_back({kBosId});
    in.back().insert(in.back().end(), x.begin(), x.end());
    out.push_back(x);
    out.back().push_back(kEosId);
  }
  return pack_decoder_rows(in, out, indices);
}

// (s_1..s_m), (t_1..t_n) -> tgt_in = (BOS, s.., SEP, t..), tgt_out = (pad x m, t.., EOS)
Batch make_prompted_batch(const std::vector<const std::vector<std::int64_t>*>& src,
                          const std::vector<const std::vector<std::int64_t>*>& tgt,
                          const std::vector<std::int64_t>& indices, std::int64_t sep_id) {
  check_rows("make_prompted_batch", src.size(), indices.size());
  if (tgt.size() != src.size())
    throw std::invalid_argument("make_prompted_batch: " + std::to_string(src.size()) + " sources but " +
                                std::to_string(tgt.size()) + " targets");
  std::vector<std::vector<std::int64_t>> in, out;
  for (std::size_t b = 0; b < src.size(); ++b) {
    const auto &s = *src[b], &t = *tgt[b];
    if (s.empty() || t.empty())
      throw std::invalid_argument("make_prompted_batch: pair " + std::to_string(indices[b]) + " has an empty side");
    std::vector<std::int64_t> row{kBosId};
    row.insert(row.end(), s.begin(), s.end());
    row.push_back(sep_id);
    row.insert(row.end(), t.begin(), t.end());
    // Position i predicts row[i + 1]: positions 0 .. m (reading <s>, s_1 .. s_m) predict s_1 ..
    // s_m and <sep>, the given prompt, so their targets are pad; position m + 1 (reading <sep>)
    // predicts t_1, and the last one (reading t_n) predicts </s>.
    std::vector<std::int64_t> target(s.size() + 1, kPadId);
    target.insert(target.end(), t.begin(), t.end());
    target.push_back(kEosId);
    in.push_back(std::move(row));
    out.push_back(std::move(target));
  }
  return pack_decoder_rows(in, out, indices);
}

MaskedRow mask_tokens(const std::vector<std::int64_t>& ids, Generator& gen, std::int64_t mask_id, std::int64_t first_ordinary,
                      std::int64_t vocab, const MaskingRates& rates) {
  if (first_ordinary >= vocab)
    throw std::invalid_argument("mask_tokens: no ordinary token: first_ordinary " + std::to_string(first_ordinary) +
                                " >= vocabulary " + std::to_string(vocab));
  MaskedRow row{ids, std::vector<std::int64_t>(ids.size(), kPadId)};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bool ordinary = ids[i] >= first_ordinary && ids[i] < vocab;
    if (!ordinary || gen.uniform() >= rates.choose) continue;
    row.target[i] = ids[i];
    const double r = gen.uniform();
    if (r < rates.mask) row.input[i] = mask_id;
    else if (r < rates.mask + rates.random)
      row.input[i] = first_ordinary + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(vocab - first_ordinary)));
  }
  return row;
}

Batch make_mlm_batch(const std::vector<MaskedRow>& rows, const std::vector<std::int64_t>& indices) {
  check_rows("make_mlm_batch", rows.size(), indices.size());
  const auto B = static_cast<std::int64_t>(rows.size());
  std::int64_t S = 0;
  for (const auto& r : rows) S = std::max<std::int64_t>(S, static_cast<std::int64_t>(r.input.size()));
  Batch batch;
  batch.indices = indices;
  batch.src = full({B, S}, static_cast<double>(kPadId), Dtype::Int64);
  batch.tgt_out = full({B, S}, static_cast<double>(kPadId), Dtype::Int64);
  batch.src_pad_mask = full({B, 1, 1, S}, 1.0, Dtype::Bool);
  std::int64_t* src = batch.src.data<std::int64_t>();
  std::int64_t* out = batch.tgt_out.data<std::int64_t>();
  bool* mask = batch.src_pad_mask.data<bool>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::size_t s = 0; s < rows[b].input.size(); ++s) {
      src[b * S + s] = rows[b].input[s];
      out[b * S + s] = rows[b].target[s];
      mask[b * S + s] = false;
      ++batch.src_tokens;
      batch.tgt_tokens += rows[b].target[s] != kPadId;
    }
  return batch;
}

Batch make_classify_batch(const std::vector<const std::vector<std::int64_t>*>& src, const std::vector<std::int64_t>& labels,
                          const std::vector<std::int64_t>& indices) {
  check_rows("make_classify_batch", src.size(), indices.size());
  if (labels.size() != src.size())
    throw std::invalid_argument("make_classify_batch: " + std::to_string(src.size()) + " rows but " +
                                std::to_string(labels.size()) + " labels");
  for (std::size_t b = 0; b < labels.size(); ++b)
    if (labels[b] < 0) throw std::invalid_argument("make_classify_batch: row " + std::to_string(indices[b]) + " has label " +
                                                   std::to_string(labels[b]) + ", expected >= 0");
  const std::vector<std::int64_t> no_target;
  const std::vector<const std::vector<std::int64_t>*> empty_targets(src.size(), &no_target);
  Batch batch = make_batch(src, empty_targets, indices);  // src (B,S) and its padding mask
  batch.tgt_in = Tensor();
  batch.tgt_pad_mask = Tensor();
  batch.tgt_out = from_vector<std::int64_t>(labels, {static_cast<std::int64_t>(labels.size())});  // (B)
  batch.tgt_tokens = batch.rows();
  return batch;
}

}  // namespace sf::data
