// What the word_lm tests share: skipping when the corpus package is not installed.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>

#include "examples/word_lm/bible_data.h"

#define SKIP_WITHOUT_BIBLE()                                            \
  if (!std::filesystem::exists(word_lm::kDefaultBibleData))             \
  GTEST_SKIP() << word_lm::kDefaultBibleData << " is not installed "    \
               << "(scripts/setup.sh installs bible-kjv-text)"
