#include "examples/word_lm/corpus.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/ops/factory.h"

namespace word_lm {

// Note [Corpus recipe]
// 1. The text (bible_data.h) is a title line and one line per verse, "<book><chapter>:<verse>
//    <text>" (books are abbreviations such as "Ge", "1S", "Rev"). The title line is skipped.
// 2. Verses are grouped into chapters (1,189 of them) in the order of the text; chapter c
//    (0-based) goes to validation when c % 20 == 18, to test when c % 20 == 19, else to
//    training: 90 / 5 / 5 percent, each split made of whole chapters spread over the whole
//    book, so the three splits draw from the same distribution and each keeps running text.
// 3. A verse is its tokenize()d words followed by <eos>.
// 4. The vocabulary comes from the training words only (Vocabulary); other words are <unk>.
// The recipe is deterministic: the same package version gives the same streams.

namespace {
constexpr int64_t kSplitPeriod = 20, kValidSlot = 18, kTestSlot = 19;
}  // namespace

std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  auto flush = [&] {
    const size_t b = word.find_first_not_of('\''), e = word.find_last_not_of('\'');
    if (b != std::string::npos) out.push_back(word.substr(b, e - b + 1));
    word.clear();
  };
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalpha(c) || c == '\'') {
      word.push_back(static_cast<char>(std::tolower(c)));
    } else {
      flush();
    }
  }
  flush();
  return out;
}

CorpusSplits split_by_chapter(const std::string& text) {
  CorpusSplits s;
  std::istringstream in(text);
  std::string line, previous_chapter;
  int64_t line_no = 0, chapter = -1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 || line.empty()) continue;  // the title line
    const size_t space = line.find(' ');
    const std::string ref = line.substr(0, space);
    const size_t colon = ref.find(':');
    EMBER_CHECK_T(ember::ValueError, colon != std::string::npos && colon > 1 && colon + 1 < ref.size(),
                  "line ", line_no, " of the corpus has no <book><chapter>:<verse> reference: '",
                  line.substr(0, 40), "'");
    const std::string book_chapter = ref.substr(0, colon);  // "Ge1", "1S10"
    if (book_chapter != previous_chapter) {
      ++chapter;
      ++s.chapters;
      previous_chapter = book_chapter;
    }
    ++s.verses;
    const int64_t slot = chapter % kSplitPeriod;
    std::vector<std::string>& dst = slot == kValidSlot ? s.valid : slot == kTestSlot ? s.test : s.train;
    for (auto& w : tokenize(space == std::string::npos ? std::string() : line.substr(space + 1))) {
      dst.push_back(std::move(w));
    }
    dst.emplace_back(kEos);
  }
  return s;
}

Vocabulary::Vocabulary(const std::vector<std::string>& words, int64_t size) {
  EMBER_CHECK_T(ember::ValueError, size >= 2, "the vocabulary needs at least 2 entries (<unk>, <eos>), got ",
                size);
  std::map<std::string, int64_t> counts;
  for (const auto& w : words) {
    if (w != kUnk && w != kEos) ++counts[w];
  }
  std::vector<std::pair<std::string, int64_t>> ranked(counts.begin(), counts.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  words_ = {kUnk, kEos};
  for (const auto& [w, n] : ranked) {
    if (static_cast<int64_t>(words_.size()) >= size) break;
    words_.push_back(w);
  }
  for (size_t i = 0; i < words_.size(); ++i) ids_.emplace(words_[i], static_cast<int64_t>(i));
}

int64_t Vocabulary::id(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? 0 : it->second;
}

std::vector<int64_t> Vocabulary::encode(const std::vector<std::string>& words) const {
  std::vector<int64_t> out;
  out.reserve(words.size());
  for (const auto& w : words) out.push_back(id(w));
  return out;
}

ember::Tensor batchify(const std::vector<int64_t>& ids, int64_t batch, int64_t first_column, int64_t columns) {
  EMBER_CHECK_T(ember::ValueError, batch > 0 && first_column >= 0 && columns > 0 && first_column + columns <= batch,
                "batchify: columns [", first_column, ", ", first_column + columns, ") of a batch of ", batch);
  const int64_t rows = static_cast<int64_t>(ids.size()) / batch;
  EMBER_CHECK_T(ember::ValueError, rows >= 2, "batchify: ", ids.size(), " tokens make fewer than 2 rows of ",
                batch, " streams (need at least ", 2 * batch, ")");
  std::vector<int64_t> out(static_cast<size_t>(rows * columns));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < columns; ++j) {
      out[static_cast<size_t>(t * columns + j)] = ids[static_cast<size_t>((first_column + j) * rows + t)];
    }
  }
  return ember::from_vector<int64_t>(out, {rows, columns});
}

}  // namespace word_lm
