// data/corpus_reader.h — finds the text files of a corpus and cuts them into documents.
//
// The default corpus is the Debian `fortunes` package: /usr/share/games/fortunes holds one text file
// per topic, where documents (fortunes) are separated by lines holding only '%', next to binary
// *.dat index files and *.u8 symlinks that duplicate the text files. Any other plain text works
// too: a file without '%' lines is one document.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moe4d {

inline constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";

// Expands `inputs`, in their order, into a duplicate-free list of files. A file is taken as given
// (even a symlink); a directory is walked recursively in sorted order, skipping symlinks, hidden
// names and *.dat files.
// Throws moe4d::Error if an input does not exist or nothing is left.
std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs);

// Glob rules for the files found in directories (`prepare --include/--exclude`; fnmatch syntax).
// A pattern without '/' is matched against the file name, one with '/' against the path relative
// to the input directory ('*' then also matches '/'). A file is kept if `include` is empty or one
// include pattern matches, and no exclude pattern matches. Files named directly are always kept.
struct CorpusFileFilter {
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  bool keeps(const std::string& relative_path) const;
};
std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs, const CorpusFileFilter& filter);

// Documents of `text`: the runs of lines between separator lines ("%", optionally "%\r"), each
// keeping its line breaks; documents that are only whitespace are dropped.
std::vector<std::string> split_documents(std::string_view text);

// Reads a whole file. Throws moe4d::Error naming it on failure.
std::string read_text_file(const std::string& path);

// Byte offset of the first invalid UTF-8 sequence, or -1 if `text` is valid UTF-8.
int64_t find_invalid_utf8(std::string_view text);

}  // namespace moe4d
