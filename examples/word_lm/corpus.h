// The word_lm corpus: the King James Bible split by chapter into train / valid / test word
// streams (Note [Corpus recipe] in corpus.cpp), a vocabulary capped to the most frequent
// training words plus <unk> and <eos>, and batchify: a stream of ids as B contiguous columns.
// Value types; no shared state.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace word_lm {

inline constexpr const char* kUnk = "<unk>";
inline constexpr const char* kEos = "<eos>";

/// Word streams: lower-case words, each verse followed by <eos>.
struct CorpusSplits {
  std::vector<std::string> train, valid, test;
  int64_t chapters = 0, verses = 0;
};

/// Splits bible text (read_bible_text) by chapter. Throws ember::ValueError naming the line when
/// a verse line has no "<book><chapter>:<verse>" reference.
CorpusSplits split_by_chapter(const std::string& text);

/// The words of one verse's text: maximal runs of letters and apostrophes, lower-cased,
/// apostrophes trimmed from both ends ("Abraham's," -> "abraham's").
std::vector<std::string> tokenize(const std::string& text);

class Vocabulary {
 public:
  /// <unk> (id 0), <eos> (id 1), then the `size` - 2 most frequent words of `words` other than
  /// those two (ties broken alphabetically). Throws ValueError when size < 2.
  Vocabulary(const std::vector<std::string>& words, int64_t size);
  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  /// The id of `word`; <unk>'s for a word outside the vocabulary.
  int64_t id(const std::string& word) const;
  const std::string& word(int64_t id) const { return words_.at(static_cast<size_t>(id)); }
  std::vector<int64_t> encode(const std::vector<std::string>& words) const;

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t> ids_;
};

/// ids as `batch` contiguous streams: int64 [T, batch] with T = ids.size() / batch, column j
/// holding ids[j * T, (j + 1) * T) (PyTorch's word_language_model batchify; the tail that does
/// not fill a row is dropped). Columns [first_column, first_column + columns) only: a --ddp rank's
/// share (columns = batch for all of them). Throws ValueError when a column would be empty.
ember::Tensor batchify(const std::vector<int64_t>& ids, int64_t batch, int64_t first_column, int64_t columns);

}  // namespace word_lm
