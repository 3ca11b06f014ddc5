#include "examples/rnn_dp/wordlang_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

#include "core/error.h"
#include "core/ops/factory.h"
#include "examples/common/distributed_job.h"

namespace rnn_dp {

// Note [Word list recipe]
// Fixed so that results compare with other frameworks (torch_reference.py does the same):
//  1. every line of a word list, stripped of ASCII whitespace at both ends (Python's bytes.strip);
//  2. words containing "'" are dropped, and words outside 2..24 bytes of UTF-8;
//  3. of the n words left, every k-th (k = max(1, n / 20000), integer division), the first
//     20,000 of those;
//  4. word i of that list is a test word when i % 10 == 0, else a training word;
//  5. with --limit L, L words of each language's training split and L of its test split, spread
//     evenly over the split (word floor(i * n / L) of n): train and test words then still come
//     from the same alphabetical range. (Taking the first L would train on words A..C and test on
//     a far wider range, so test accuracy stayed near 0.3 while the loss fell.)
// Six languages give 6 x 18,000 = 108,000 training and 6 x 2,000 = 12,000 test words.

namespace {

constexpr size_t kMinBytes = 2;
constexpr size_t kMaxBytes = 24;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string> read_filtered(const std::string& path, const Language& lang) {
  struct stat st {};
  EMBER_CHECK(::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode), "the ", lang.name, " word list ",
              path, " is missing; install the Debian package ", lang.package, " (apt-get install ", lang.package,
              "), or run scripts/setup.sh, which installs all six word lists");
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "cannot read the word list ", path, ": ", std::strerror(errno));
  std::vector<std::string> words;
  std::string line;
  while (std::getline(in, line)) {
    size_t b = 0, e = line.size();
    while (b < e && is_space(line[b])) ++b;
    while (e > b && is_space(line[e - 1])) --e;
    const size_t n = e - b;
    if (n < kMinBytes || n > kMaxBytes) continue;
    std::string w = line.substr(b, n);
    if (w.find('\'') != std::string::npos) continue;
    words.push_back(std::move(w));
  }
  EMBER_CHECK(!in.bad(), "error reading the word list ", path, ": ", std::strerror(errno));
  return words;
}

// Step 5 of Note [Word list recipe]: `limit` words spread evenly over a split, word
// floor(i * n / limit) for i < limit, so a quick run's train and test words come from the same
// alphabetical range as the full splits.
std::vector<Word> evenly_spaced(std::vector<Word> words, size_t limit) {
  const size_t n = words.size();
  if (limit >= n) return words;
  std::vector<Word> out;
  out.reserve(limit);
  for (size_t i = 0; i < limit; ++i) out.push_back(std::move(words[i * n / limit]));
  return out;
}

}  // namespace

WordLangSplits load_wordlang(const std::string& dict_dir, std::optional<size_t> limit) {
  WordLangSplits out;
  for (size_t label = 0; label < kLanguages.size(); ++label) {
    const Language& lang = kLanguages[label];
    const std::string path = dict_dir + "/" + lang.file;
    std::vector<std::string> words = read_filtered(path, lang);
    const size_t k = std::max<size_t>(1, words.size() / kWordsPerLanguage);
    std::vector<Word> train, test;
    size_t chosen = 0;
    for (size_t j = 0; j < words.size() && chosen < kWordsPerLanguage; j += k, ++chosen) {
      (chosen % 10 == 0 ? test : train).push_back(Word{std::move(words[j]), static_cast<int64_t>(label)});
    }
    EMBER_CHECK(chosen == kWordsPerLanguage, "the word list ", path, " gives only ", chosen,
                " words of 2..24 bytes without \"'\" (the recipe needs ", kWordsPerLanguage,
                "); is it the Debian package ", lang.package, "?");
    for (auto* split : {&train, &test}) {
      if (limit) *split = evenly_spaced(std::move(*split), *limit);
      std::vector<Word>& dst = split == &train ? out.train : out.test;
      std::move(split->begin(), split->end(), std::back_inserter(dst));
    }
  }
  return out;
}

WordLangDataset::WordLangDataset(std::vector<Word> words, double augment_p)
    : words_(std::move(words)), augment_p_(augment_p) {
  EMBER_CHECK_T(ember::ValueError, augment_p >= 0.0 && augment_p <= 1.0,
                "WordLangDataset: augment_p must be in [0, 1], got ", augment_p);
}

std::pair<ember::Tensor, int64_t> WordLangDataset::get(size_t index) {
  EMBER_CHECK_T(ember::IndexError, index < words_.size(), "WordLangDataset: index ", index,
                " is out of range for a dataset of ", words_.size(), " words");
  const Word& w = words_[index];
  size_t skip = w.bytes.size();  // no byte dropped
  if (augment_p_ > 0.0 && w.bytes.size() > kMinBytes) {
    std::mt19937_64 own;
    if (sample_seed_) own.seed(ember_examples::mix_seed(*sample_seed_, index));
    std::mt19937_64& rng = sample_seed_ ? own : rng_;
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    if (coin(rng) < augment_p_) skip = std::uniform_int_distribution<size_t>(0, w.bytes.size() - 1)(rng);
  }
  const int64_t n = static_cast<int64_t>(w.bytes.size() - (skip < w.bytes.size() ? 1 : 0));
  ember::Tensor tokens = ember::empty({n}, ember::TensorOptions(ember::kInt64));
  int64_t* p = tokens.data_ptr<int64_t>();
  for (size_t i = 0; i < w.bytes.size(); ++i) {
    if (i != skip) *p++ = static_cast<int64_t>(static_cast<unsigned char>(w.bytes[i])) + 1;
  }
  return {std::move(tokens), w.label};
}

WordBatch WordBatchCollate::operator()(std::vector<std::pair<ember::Tensor, int64_t>> samples) const {
  std::vector<ember::Tensor> tokens;
  tokens.reserve(samples.size());
  ember::Tensor labels = ember::empty({static_cast<int64_t>(samples.size())}, ember::TensorOptions(ember::kInt64));
  int64_t* y = labels.data_ptr<int64_t>();
  for (auto& [t, label] : samples) {
    tokens.push_back(std::move(t));
    *y++ = label;
  }
  auto [padded, lengths] = pad_(tokens);  // PadCollate checks for an empty batch
  return {std::move(padded), std::move(lengths), std::move(labels)};
}

}  // namespace rnn_dp
