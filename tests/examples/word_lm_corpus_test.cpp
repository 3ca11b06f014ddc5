// examples/word_lm's corpus: the bible-kjv data file decodes block by block to the whole text
// (compress(1)'s LZW, checked on hand-made streams too), the chapter split, tokenization, the
// capped vocabulary and batchify's contiguous streams (and a --ddp rank's share of them).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "examples/word_lm/bible_data.h"
#include "examples/word_lm/corpus.h"
#include "tests/examples/word_lm_test_util.h"
#include "tests/support/error_text.h"

namespace {

using word_lm::batchify;
using word_lm::CorpusSplits;
using word_lm::tokenize;
using word_lm::Vocabulary;

// compress(1)'s encoder for inputs short enough that every code stays 9 bits wide (under 255
// table entries): codes written LSB first, no header. Independent of the decoder under test.
std::vector<uint8_t> lzw_encode_9bit(const std::string& s) {
  std::map<std::string, int> table;
  for (int i = 0; i < 256; ++i) table[std::string(1, static_cast<char>(i))] = i;
  int next = 257;
  std::vector<int> codes;
  std::string w;
  for (char c : s) {
    std::string wc = w + c;
    if (table.count(wc)) {
      w = wc;
    } else {
      codes.push_back(table.at(w));
      table[wc] = next++;
      w = std::string(1, c);
    }
  }
  if (!w.empty()) codes.push_back(table.at(w));
  EXPECT_LT(next, 512) << "the helper only writes 9-bit codes";
  std::vector<uint8_t> out((codes.size() * 9 + 7) / 8, 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    for (int b = 0; b < 9; ++b) {
      if (codes[i] >> b & 1) out[(i * 9 + b) / 8] |= static_cast<uint8_t>(1 << ((i * 9 + b) % 8));
    }
  }
  return out;
}

TEST(WordLmCorpus, LzwDecodesRepeatsAndTheCodeBeingDefined) {
  // "aaaa..." makes the decoder meet a code it is defining at that moment (cScSc).
  for (const std::string s : {"TOBEORNOTTOBEORTOBEORNOT", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "x",
                              "In the beginning God created the heaven and the earth. And the earth"}) {
    const auto bytes = lzw_encode_9bit(s);
    EXPECT_EQ(word_lm::lzw_decode(bytes.data(), bytes.size(), 1 << 16, "test"), s);
  }
}

TEST(WordLmCorpus, LzwCorruptStreamIsAValueError) {
  // First code 300 (not a byte), then a code far beyond the table.
  const std::vector<uint8_t> bad{0x2C, 0x03, 0xFF, 0xFF};
  EXPECT_THROW(word_lm::lzw_decode(bad.data(), bad.size(), 1 << 16, "test"), ember::ValueError);
  const std::vector<uint8_t> ahead{0x41, 0xFE, 0x03};  // 'A', then code 511: entry 257 is the next
  EXPECT_THROW(word_lm::lzw_decode(ahead.data(), ahead.size(), 1 << 16, "test"), ember::ValueError);
}

TEST(WordLmCorpus, InstalledBibleDecodesToEveryVerse) {
  SKIP_WITHOUT_BIBLE();
  const std::string text = word_lm::read_bible_text();
  std::istringstream in(text);
  std::string line, first_verse, last_verse;
  int64_t lines = 0;
  while (std::getline(in, line)) {
    if (++lines == 2) first_verse = line;
    if (!line.empty()) last_verse = line;
  }
  // 68 blocks of 64 KiB: a wrong code width or group skip anywhere garbles everything after it.
  EXPECT_EQ(lines, 31103);  // the title line and 31,102 verses
  EXPECT_EQ(first_verse, "Ge1:1 In the beginning God created the heaven and the earth.");
  EXPECT_EQ(last_verse, "Rev22:21 The grace of our Lord Jesus Christ be with you all. Amen.");
  EXPECT_EQ(text.find('\0'), std::string::npos);
}

TEST(WordLmCorpus, MissingOrDamagedFileIsAValueErrorNamingIt) {
  const std::string missing =
      ember::support::error_of<ember::ValueError>([] { word_lm::read_bible_text("/nonexistent/bible.data"); });
  EXPECT_NE(missing.find("bible-kjv-text"), std::string::npos) << missing;
  SKIP_WITHOUT_BIBLE();
  std::ifstream in(word_lm::kDefaultBibleData, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = ::testing::TempDir() + "word_lm_truncated.data";
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes.substr(0, bytes.size() / 2);  // the offset table now points past the end
  }
  const std::string damaged = ember::support::error_of<ember::ValueError>([&] { word_lm::read_bible_text(path); });
  EXPECT_NE(damaged.find(path), std::string::npos) << damaged;
  std::remove(path.c_str());
}

TEST(WordLmCorpus, TokenizeKeepsLettersAndInnerApostrophes) {
  EXPECT_EQ(tokenize("And Abraham's servant, (the LORD) said: 'Tis well-favoured!"),
            (std::vector<std::string>{"and", "abraham's", "servant", "the", "lord", "said", "tis", "well", "favoured"}));
  EXPECT_TRUE(tokenize(" ,;: ").empty());
}

TEST(WordLmCorpus, ChaptersEighteenAndNineteenOfEveryTwentyAreValidationAndTest) {
  // Chapter c's first word names it in letters (tokenize drops digits): "waa", "wab", ...
  auto word = [](int c) { return std::string("w") + static_cast<char>('a' + c / 26) + static_cast<char>('a' + c % 26); };
  std::string text = "Title line\n";
  for (int c = 0; c < 40; ++c) {
    text += "Bk" + std::to_string(c + 1) + ":1 " + word(c) + " x\n";
    text += "Bk" + std::to_string(c + 1) + ":2 y\n";
  }
  const CorpusSplits s = word_lm::split_by_chapter(text);
  EXPECT_EQ(s.chapters, 40);
  EXPECT_EQ(s.verses, 80);
  EXPECT_EQ(s.valid,
            (std::vector<std::string>{word(18), "x", "<eos>", "y", "<eos>", word(38), "x", "<eos>", "y", "<eos>"}));
  EXPECT_EQ(s.test,
            (std::vector<std::string>{word(19), "x", "<eos>", "y", "<eos>", word(39), "x", "<eos>", "y", "<eos>"}));
  EXPECT_EQ(s.train.size(), 36u * 5);
  EXPECT_EQ(s.train[0], word(0));
  EXPECT_EQ(s.train[5], word(1));
  EXPECT_THROW(word_lm::split_by_chapter("Title\nno reference here\n"), ember::ValueError);
}

TEST(WordLmCorpus, InstalledBibleSplitsNinetyFiveFive) {
  SKIP_WITHOUT_BIBLE();
  const CorpusSplits s = word_lm::split_by_chapter(word_lm::read_bible_text());
  EXPECT_EQ(s.chapters, 1189);
  EXPECT_EQ(s.verses, 31102);
  // The same recipe written independently in Python (re.findall("[A-Za-z']+"), lower-cased,
  // apostrophes stripped at the ends, <eos> per verse) counted these.
  EXPECT_EQ(s.train.size(), 740327u);
  EXPECT_EQ(s.valid.size(), 40517u);
  EXPECT_EQ(s.test.size(), 39942u);
}

TEST(WordLmCorpus, VocabularyKeepsTheMostFrequentWordsAndMapsTheRestToUnk) {
  const std::vector<std::string> words{"b", "a", "c", "a", "<eos>", "b", "a", "d", "c", "<eos>", "e"};
  const Vocabulary v(words, 4);  // <unk>, <eos>, a (3), then b and c tie (2): b first
  ASSERT_EQ(v.size(), 4);
  EXPECT_EQ(v.word(0), "<unk>");
  EXPECT_EQ(v.word(1), "<eos>");
  EXPECT_EQ(v.word(2), "a");
  EXPECT_EQ(v.word(3), "b");
  EXPECT_EQ(v.encode({"a", "c", "<eos>", "zzz", "b"}), (std::vector<int64_t>{2, 0, 1, 0, 3}));
  EXPECT_EQ(Vocabulary(words, 100).size(), 7);  // every word there is, no more
  EXPECT_THROW(Vocabulary(words, 1), ember::ValueError);
}

TEST(WordLmCorpus, BatchifyMakesContiguousColumnsAndRanksTakeTheirShare) {
  std::vector<int64_t> ids(26);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  const ember::Tensor all = batchify(ids, 4, 0, 4);  // 6 rows; ids 24, 25 dropped
  ASSERT_EQ(all.sizes(), (ember::IntList{6, 4}));
  const auto v = all.to_vector<int64_t>();
  for (int64_t t = 0; t < 6; ++t) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(v[static_cast<size_t>(t * 4 + j)], j * 6 + t);
  }
  const ember::Tensor rank1 = batchify(ids, 4, 2, 2);
  ASSERT_EQ(rank1.sizes(), (ember::IntList{6, 2}));
  const auto r = rank1.to_vector<int64_t>();
  for (int64_t t = 0; t < 6; ++t) {
    EXPECT_EQ(r[static_cast<size_t>(t * 2)], v[static_cast<size_t>(t * 4 + 2)]);
    EXPECT_EQ(r[static_cast<size_t>(t * 2 + 1)], v[static_cast<size_t>(t * 4 + 3)]);
  }
  EXPECT_THROW(batchify(ids, 20, 0, 20), ember::ValueError);  // 1 row: no target for it
  EXPECT_THROW(batchify(ids, 4, 3, 2), ember::ValueError);
}

}  // namespace
