// The makemore data: words from a word list, lower-cased, letters only, encoded as
// (context of the previous `block` characters, next character) pairs; '.' (index 0) marks
// the start and end of a word.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace makemore {

constexpr int kVocab = 27;  // '.' + 'a'..'z'
inline char itos(int i) { return i == 0 ? '.' : static_cast<char>('a' + i - 1); }

struct Examples {
  std::vector<int64_t> contexts;  // n x block character indices
  std::vector<int64_t> targets;   // n
  int64_t size() const { return static_cast<int64_t>(targets.size()); }
};

// Reads the word list (one word per line); keeps words that are letters only after
// lower-casing, without duplicates, in a seeded random order.
std::vector<std::string> load_words(const std::string& path, uint64_t seed);
Examples make_examples(const std::vector<std::string>& words, int block);
// -log of the unigram (character frequency) probability of each target, averaged: the loss of
// a model that ignores the context, which a useful model must beat.
double unigram_baseline(const Examples& train, const Examples& eval);

}  // namespace makemore
