#include "dataset.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>

namespace makemore {

std::vector<std::string> load_words(const std::string& path, uint64_t seed) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the word list " + path + " (Debian package wamerican installs it)");
  std::set<std::string> unique;
  for (std::string line; std::getline(in, line);) {
    std::string w;
    bool ok = !line.empty();
    for (unsigned char ch : line) {
      if (!std::isalpha(ch) || ch > 127) { ok = false; break; }
      w += static_cast<char>(std::tolower(ch));
    }
    if (ok) unique.insert(w);
  }
  std::vector<std::string> words(unique.begin(), unique.end());
  std::mt19937_64 rng(seed);
  std::shuffle(words.begin(), words.end(), rng);
  return words;
}

Examples make_examples(const std::vector<std::string>& words, int block) {
  Examples ex;
  for (const auto& w : words) {
    std::vector<int64_t> ctx(block, 0);
    for (size_t i = 0; i <= w.size(); ++i) {
      int64_t next = i < w.size() ? w[i] - 'a' + 1 : 0;
      ex.contexts.insert(ex.contexts.end(), ctx.begin(), ctx.end());
      ex.targets.push_back(next);
      ctx.erase(ctx.begin());
      ctx.push_back(next);
    }
  }
  return ex;
}

double unigram_baseline(const Examples& train, const Examples& eval) {
  std::vector<double> count(kVocab, 1.0);  // add-one smoothing
  for (int64_t t : train.targets) count[t] += 1;
  double total = 0;
  for (double c : count) total += c;
  double nll = 0;
  for (int64_t t : eval.targets) nll -= std::log(count[t] / total);
  return nll / static_cast<double>(eval.size());
}

}  // namespace makemore
