// Word -> language identification from Debian's word lists (/usr/share/dict): the data of
// examples/rnn_dp. load_wordlang() applies the fixed recipe (see Note [Word list recipe] in
// wordlang_dataset.cpp; torch_reference.py implements the same), WordLangDataset serves the
// words as token tensors, WordBatchCollate pads a batch. The dataset is a value that each
// DataLoader worker owns a forked copy of; it is not thread-safe (its augmentation RNG mutates).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/pad_collate.h"

namespace rnn_dp {

/// One language: its word list in the dictionary directory and the Debian package shipping it.
struct Language {
  const char* name;     // "english", ...
  const char* file;     // "american-english", ...
  const char* package;  // "wamerican", ...
};
inline constexpr std::array<Language, 6> kLanguages{{
    {"english", "american-english", "wamerican"},
    {"german", "ngerman", "wngerman"},
    {"french", "french", "wfrench"},
    {"italian", "italian", "witalian"},
    {"spanish", "spanish", "wspanish"},
    {"dutch", "dutch", "wdutch"},
}};
inline constexpr int64_t kNumClasses = static_cast<int64_t>(kLanguages.size());
/// Tokens are UTF-8 bytes + 1; 0 is padding.
inline constexpr int64_t kVocabSize = 257;
inline constexpr int64_t kPaddingToken = 0;
inline constexpr size_t kWordsPerLanguage = 20000;
inline constexpr size_t kFullTrainWords = 108000;
inline constexpr size_t kFullTestWords = 12000;

struct Word {
  std::string bytes;  // UTF-8
  int64_t label = 0;  // index into kLanguages
};

struct WordLangSplits {
  std::vector<Word> train;
  std::vector<Word> test;
};

/// Reads the six word lists from `dict_dir` and applies the recipe. With `limit`, keeps `limit`
/// train and `limit` test words of each language, spread evenly over each split (quick runs,
/// tests; see Note [Word list recipe] in wordlang_dataset.cpp).
/// Throws ember::Error naming the missing file, its Debian package and scripts/setup.sh when a
/// word list is absent, and when a list yields fewer than kWordsPerLanguage words.
WordLangSplits load_wordlang(const std::string& dict_dir = "/usr/share/dict",
                             std::optional<size_t> limit = std::nullopt);

/// Map-style dataset of (tokens int64 [L], label). With augment_p > 0, each get() drops one
/// random byte of a word (longer than 2 bytes) with probability augment_p, drawing from the
/// dataset's own RNG: each DataLoader worker seeds its copy in worker_init_fn from
/// get_worker_info()->seed (the FAQ's per-worker NumPy seeding), so workers draw different
/// streams and a run is reproducible for a given seed and worker count. After
/// use_sample_streams(seed), get(i) draws from a generator of (seed, i) alone instead, so a
/// word's augmentation does not depend on which rank, worker or batch fetched it (rnn_dp's
/// --deterministic: Note [Shard steps] in train.cpp).
class WordLangDataset : public ember::data::Dataset<std::pair<ember::Tensor, int64_t>> {
 public:
  explicit WordLangDataset(std::vector<Word> words, double augment_p = 0.0);
  std::pair<ember::Tensor, int64_t> get(size_t index) override;
  size_t size() const override { return words_.size(); }

  void seed_rng(uint64_t seed) { rng_.seed(seed); }
  /// From now on each sample draws from its own stream of (seed, index); pass a seed per epoch.
  void use_sample_streams(uint64_t seed) { sample_seed_ = seed; }
  const std::vector<Word>& words() const { return words_; }

 private:
  std::vector<Word> words_;
  double augment_p_;
  std::mt19937_64 rng_{0};
  std::optional<uint64_t> sample_seed_;  // set: per-sample streams instead of rng_
};

/// A batch: (padded tokens [B, T] or [T, B], lengths int64 [B], labels int64 [B]).
using WordBatch = std::tuple<ember::Tensor, ember::Tensor, ember::Tensor>;

/// Pads tokens with data::PadCollate (value 0) and stacks the labels. Stateless; thread-safe.
class WordBatchCollate {
 public:
  explicit WordBatchCollate(bool batch_first = true) : pad_(static_cast<double>(kPaddingToken), batch_first) {}
  WordBatch operator()(std::vector<std::pair<ember::Tensor, int64_t>> samples) const;

 private:
  ember::data::PadCollate pad_;
};

}  // namespace rnn_dp
