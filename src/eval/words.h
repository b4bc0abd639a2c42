// snapkv eval: English word lists written for this project (adjectives, nouns, verbs), used where
// RULER draws from the wonderwords lists: needle keys ("adjective-noun") and the common-words
// vocabulary.
#pragma once

#include <string>
#include <vector>

namespace snapkv::eval {

const std::vector<std::string>& adjectives();
const std::vector<std::string>& nouns();
const std::vector<std::string>& verbs();

/// Every "adjective-noun" pair, sorted (RULER's needle keys of type "words").
const std::vector<std::string>& key_words();

/// The vocabulary of the common-words task: adjectives, nouns and verbs plus `extra` (e.g. the
/// words of the natural-text haystack), lower-case ASCII letters only, at least 3 letters,
/// sorted and without duplicates.
std::vector<std::string> word_vocabulary(const std::vector<std::string>& extra);

}  // namespace snapkv::eval
